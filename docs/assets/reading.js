// Long identifiers in table cells (aten::_scaled_dot_product_flash_attention_for_cpu) would set
// a table's width on their own. Offer the browser a line break after each "::", "_" and "."
// inside them (<wbr>: nothing is added to the text a reader copies), so a table fits its column
// and an op name breaks at its joints rather than anywhere.
(function () {
  const JOINT = /(::|_|\.)(?=[^\s])/g;

  function breakable(code) {
    if (code.dataset.adBreakable || code.children.length) return;
    const text = code.textContent;
    if (text.length < 16 || !JOINT.test(text)) return;
    JOINT.lastIndex = 0;
    code.textContent = "";
    let last = 0;
    for (const match of text.matchAll(JOINT)) {
      const end = match.index + match[0].length;
      code.append(text.slice(last, end), document.createElement("wbr"));
      last = end;
    }
    code.append(text.slice(last));
    code.dataset.adBreakable = "1";
  }

  function run() {
    document.querySelectorAll(".md-typeset td code").forEach(breakable);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
})();
