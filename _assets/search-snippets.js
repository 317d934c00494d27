/* Search result snippets without raw TeX. Sphinx builds each snippet from the text of the
   result's page, where a formula is still its TeX source (MathJax typesets it only in the
   browser, on the page itself): each formula is shown as "…" in the snippet instead. */
(() => {
  if (typeof Search === "undefined" || !Search.htmlToText) return;
  const htmlToText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".math, mjx-container").forEach((el) => el.replaceWith(" … "));
    return htmlToText(page.documentElement.outerHTML, anchor);
  };
})();
