# Imported, as an experiment module is, by the worker server of a build a test starts
# (ATTENTION_DOCS_EXPERIMENTS): its CPU timing blocks are a tenth as long, as in the test
# process. A test checks what such a build shows, never how fast its numbers are.
from short_timing import short_cpu_rounds

short_cpu_rounds()
