/* Keep the maths visible whatever a reader once chose in MathJax's right-click menu.
   The site serves MathJax's TeX input and CommonHTML output only (book/_ext/book_site.py).
   The menu's accessibility explorer (with its speech engine) and its SVG renderer need
   components the site does not serve: once chosen, such a setting is saved in the browser and
   every formula of every page disappears. Those settings are forced off, saved choices included,
   and their menu items disabled; the rest of the menu (zoom, copy as TeX or MathML) stays. */
(() => {
  const KEY = "MathJax-Menu-Settings";
  const FIXED = {
    explorer: false,
    collapsible: false,
    autocollapse: false,
    speech: false,
    braille: false,
    renderer: "CHTML",
  };
  try {
    const saved = JSON.parse(window.localStorage.getItem(KEY) || "{}");
    window.localStorage.setItem(KEY, JSON.stringify({ ...saved, ...FIXED }));
  } catch (error) {
    /* no storage (private mode, file://): nothing saved, nothing to repair */
  }
  const config = (window.MathJax = window.MathJax || {});
  config.options = config.options || {};
  const menuOptions = (config.options.menuOptions = config.options.menuOptions || {});
  menuOptions.settings = { ...(menuOptions.settings || {}), ...FIXED };
  config.startup = config.startup || {};
  config.startup.ready = () => {
    MathJax.startup.defaultReady();
    const menu = MathJax.startup.document.menu && MathJax.startup.document.menu.menu;
    if (!menu) return;
    for (const path of [["Accessibility"], ["Settings", "Renderer"]]) {
      const item = menu.findID(...path);
      if (item) item.disable();
    }
  };
})();
