/* Search result snippets without raw TeX. Sphinx builds each snippet from the text of the
   result's page, where a formula is still its TeX source (MathJax typesets it only on the page
   itself). In a snippet, a short formula is written in plain text (\mu on \mathbb R^d reads
   "μ on ℝ^d") and any other formula is shown as "…". */
(() => {
  if (typeof Search === "undefined" || !Search.htmlToText) return;
  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", zeta: "ζ",
    eta: "η", theta: "θ", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν", xi: "ξ", pi: "π",
    rho: "ρ", sigma: "σ", tau: "τ", phi: "φ", varphi: "φ", chi: "χ", psi: "ψ", omega: "ω",
    Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Pi: "Π", Sigma: "Σ", Phi: "Φ",
    Psi: "Ψ", Omega: "Ω", ell: "ℓ", infty: "∞", le: "≤", leq: "≤", ge: "≥", geq: "≥",
    to: "→", in: "∈", cdot: "·", times: "×", top: "ᵀ", ldots: "…", dots: "…",
  };
  const BLACKBOARD = { R: "ℝ", N: "ℕ", Z: "ℤ", S: "𝕊", E: "𝔼", P: "ℙ" };
  const MAX_PLAIN = 24;
  const plain = (tex) => {
    let text = tex.replace(/^\\[(\[]|\\[)\]]$/g, "").trim();
    text = text.replace(/\\mathbb\s*\{?([A-Z])\}?/g, (m, c) => BLACKBOARD[c] || m);
    text = text.replace(/\\([A-Za-z]+)(?![A-Za-z])/g, (m, w) => SYMBOLS[w] || m);
    text = text.replace(/[{}]/g, "").replace(/\\[,;! ]/g, " ");
    return /\\|\$/.test(text) || text.length > MAX_PLAIN ? "…" : text;
  };
  const htmlToText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".math").forEach((el) => el.replaceWith(plain(el.textContent)));
    return htmlToText(page.documentElement.outerHTML, anchor);
  };
})();
