// Point webpack's publicPath inside embed-amd.js (derived from each AMD module's URI) at this
// folder, so that the widgets' font files load from _static/widgets/ at any page depth.
(function () {
  var dir = new URL(".", document.currentScript.src).href.replace(/\/$/, "");
  var ids = ["base", "base7", "controls", "controls7", "html-manager"];
  var paths = { "@jupyter-widgets/html-manager/dist": dir };
  ids.forEach(function (id) { paths["@jupyter-widgets/" + id] = dir + "/" + id; });
  require.config({ paths: paths });
})();

// The widget manager typesets its labels with the MathJax 2 call MathJax.Hub.Queue, which
// MathJax 3 (served by the book) does not have: give every MathJax object a Hub that forwards
// to MathJax 3's typesetPromise, including the object MathJax 3 installs when it loads.
(function () {
  function withHub(mj) {
    if (mj && typeof mj === "object" && !mj.Hub) {
      mj.Hub = {
        Queue: function (job) {
          var element = job && job[2];
          if (window.MathJax && window.MathJax.typesetPromise) {
            window.MathJax.typesetPromise(element ? [element] : undefined);
          }
        },
      };
    }
    return mj;
  }
  var current = withHub(window.MathJax);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    get: function () { return current; },
    set: function (value) { current = withHub(value); },
  });
})();
