# Publishing (issue 51): the repository `owner/name` (ATTENTION_DOCS_REPOSITORY, else the
# GITHUB_REPOSITORY that GitHub Actions sets) gives the site its address, its edit links and a
# link to the repository, and nothing more: without it a build is the local build it always
# was. Checked on the index alone (tools/preview.py, about a second), not on a second build of
# the whole site. The offline build opened from disk is a browser test (tests/test_browser.py);
# the workflow's schema is checked by `nox -s lint`, its shape here.
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urljoin

import pytest
import yaml
from conftest import ROOT
from site_links import foreign_loads

from attention_docs.mkdocs_plugin import publish_links, site_links

SITE_URL = "https://owner.github.io/name/"
REPO_URL = "https://github.com/Owner/name"
WORKFLOW = ROOT / ".github" / "workflows" / "docs.yml"


def preview_index(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """The index alone, built strictly by tools/preview.py against an empty store."""
    command = [sys.executable, "tools/preview.py", "--store", str(tmp_path / "store")]
    command += ["--mode", "frozen", "--site", str(tmp_path / "site"), "index.md"]
    return subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
    )


def build_index(tmp_path: Path, **env: str) -> Path:
    result = preview_index(tmp_path, **env)
    assert result.returncode == 0, result.stderr[-4000:]
    return tmp_path / "site"


def test_the_repository_gives_the_site_its_address_edit_links_and_repository_link(tmp_path):
    # ATTENTION_DOCS_REPOSITORY wins over the repository a CI run names.
    site = build_index(
        tmp_path, ATTENTION_DOCS_REPOSITORY="Owner/name", GITHUB_REPOSITORY="ci/other"
    )
    index = (site / "index.html").read_text(encoding="utf-8")
    assert f'<link rel="canonical" href="{SITE_URL}">' in index
    assert f'href="{REPO_URL}/edit/main/docs/index.md" title="Edit this page"' in index
    assert f'href="{REPO_URL}"' in index  # the footer's link to the repository
    sitemap = (site / "sitemap.xml").read_text(encoding="utf-8")
    assert re.findall(r"<loc>(.*?)</loc>", sitemap) == [SITE_URL]
    # Not Material's repository widget: its script asks GitHub's API for stars and forks.
    assert 'data-md-component="source"' not in index
    assert foreign_loads(site) == []
    # A missing page on GitHub Pages, at any depth, gets a 404 page whose links and assets
    # are under the site's address, and which links home.
    missing = (site / "404.html").read_text(encoding="utf-8")
    links = re.findall(r'<(?:a|link|script)\b[^>]*\b(?:href|src)="([^"]+)"', missing)
    local = [urljoin(SITE_URL + "no/such/page/", link) for link in links if "//" not in link]
    assert local and all(url.startswith(SITE_URL) for url in local), local
    assert SITE_URL in local


def test_without_a_repository_the_site_has_no_address(tmp_path):
    site = build_index(tmp_path)
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'rel="canonical"' not in index and 'rel="edit"' not in index
    assert "github.com" not in index
    assert "<loc>" not in (site / "sitemap.xml").read_text(encoding="utf-8")


def test_a_repository_that_is_not_owner_name_fails_the_build_in_one_sentence(tmp_path):
    result = preview_index(tmp_path, ATTENTION_DOCS_REPOSITORY="owner")
    assert result.returncode != 0
    error = "the repository 'owner' is not a GitHub owner/name (set by ATTENTION_DOCS_REPOSITORY)"
    assert error in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("repository", ["owner/name/extra", "owner/..", "a b/c", "-/"])
def test_only_an_owner_name_is_a_repository(repository):
    with pytest.raises(ValueError, match="is not a GitHub owner/name"):
        publish_links(SimpleNamespace(site_url="", edit_uri=None, extra={}), repository)


def test_what_mkdocs_yml_sets_is_kept():
    config = SimpleNamespace(site_url="https://example.org/", edit_uri=None, extra={})
    publish_links(config, "Owner/name")
    assert config.site_url == "https://example.org/"
    assert config.edit_uri == f"{REPO_URL}/edit/main/docs/"
    assert config.extra["social"][0]["link"] == REPO_URL


def test_links_to_a_page_name_its_file_in_the_offline_build():
    html = '<a href="@site/method/#noise">method</a> <a href="@site/assets/cited/README.txt">'
    assert site_links(html, "chapters") == (
        '<a href="../method/#noise">method</a> <a href="../assets/cited/README.txt">'
    )
    assert site_links(html, "chapters", directory_urls=False) == (
        '<a href="../method.html#noise">method</a> <a href="../assets/cited/README.txt">'
    )


def test_the_workflow_publishes_the_frozen_build_with_least_permissions():
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    jobs = workflow["jobs"]
    assert workflow["permissions"] == {"contents": "read"}
    assert jobs["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert "permissions" not in jobs["build"]
    assert jobs["deploy"]["if"] == "github.event_name == 'push'"
    assert jobs["deploy"]["concurrency"]["group"]
    # yaml reads the key `on` as True.
    assert workflow[True]["push"]["branches"] == ["main"] and "pull_request" in workflow[True]
    runs = "\n".join(step.get("run", "") for step in jobs["build"]["steps"])
    assert "nox -s docs -- --frozen --offline" in runs
    assert "nox -s docs -- --frozen\n" in runs + "\n"
    # Every action pinned to a commit; its comment says which release that is.
    text = WORKFLOW.read_text(encoding="utf-8")
    uses = re.findall(r"uses: (\S+)(.*)", text)
    assert len(uses) == 5
    for action, comment in uses:
        assert re.fullmatch(r"actions/[a-z-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r"\s+# v\d+\.\d+\.\d+", comment), action
