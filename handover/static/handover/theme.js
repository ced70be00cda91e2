/* The colour theme: the person's choice (localStorage "theme": "light" or "dark") or the system's
   (prefers-color-scheme, in app.css). Loaded without defer in <head>, so the choice is on <html>
   before the first paint (no flash); the header's button switches it and remembers it. */
(function () {
  "use strict";
  var KEY = "theme";
  var root = document.documentElement;
  function stored() {
    try { return window.localStorage.getItem(KEY); } catch (e) { return null; }
  }
  function current() {
    var chosen = root.getAttribute("data-theme");
    if (chosen === "light" || chosen === "dark") { return chosen; }
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  var first = stored();
  if (first === "light" || first === "dark") { root.setAttribute("data-theme", first); }
  function label(button) {
    button.setAttribute("aria-pressed", current() === "dark" ? "true" : "false");
  }
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("theme-toggle");
    if (!button) { return; }
    button.hidden = false;
    label(button);
    button.addEventListener("click", function () {
      var next = current() === "dark" ? "light" : "dark";
      root.setAttribute("data-theme", next);
      try { window.localStorage.setItem(KEY, next); } catch (e) { /* private mode: this page only */ }
      label(button);
    });
  });
}());
