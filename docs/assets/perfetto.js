// "Open in Perfetto": fetch the trace beside the page, open ui.perfetto.dev and hand it the
// bytes through Perfetto's postMessage protocol (PING until PONG, then the buffer). Nothing
// is loaded from another host until a reader clicks the button.
(function () {
  const ORIGIN = "https://ui.perfetto.dev";

  async function traceBytes(url) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`could not fetch ${url}: HTTP ${response.status}`);
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (bytes[0] === 0x1f && bytes[1] === 0x8b && "DecompressionStream" in window) {
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      return await new Response(stream).arrayBuffer();
    }
    return bytes.buffer;
  }

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button.ad-perfetto");
    if (!button) return;
    const url = new URL(button.dataset.trace, document.baseURI).href;
    const perfetto = window.open(ORIGIN);
    if (!perfetto) {
      alert("The browser blocked the Perfetto tab. Allow pop-ups for this site, or download the trace and open it at " + ORIGIN);
      return;
    }
    let buffer;
    try {
      buffer = await traceBytes(url);
    } catch (error) {
      perfetto.close();
      alert(`Open in Perfetto needs the site served over HTTP (not opened as a file): ${error.message}`);
      return;
    }
    const title = url.split("/").pop();
    const timer = setInterval(() => perfetto.postMessage("PING", ORIGIN), 100);
    window.addEventListener("message", function onMessage(message) {
      if (message.origin !== ORIGIN || message.data !== "PONG") return;
      clearInterval(timer);
      window.removeEventListener("message", onMessage);
      perfetto.postMessage({ perfetto: { buffer, title, url: location.href } }, ORIGIN);
    });
  });
})();
