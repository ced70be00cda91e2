/* A table or chart wider than the screen scrolls sideways (app.css, under 700 px). A keyboard user
   must reach that scrolling too, so each region that overflows becomes focusable (tabindex="0":
   arrow keys then scroll it) and shows the focus ring; one that fits stays out of the tab order.
   Run on load, on resize and after htmx swaps a fragment in. */
(function () {
  "use strict";
  var SELECTOR = "main table, main .time-axis-scroll, main .table-scroll, main pre.body";
  function mark() {
    var regions = document.querySelectorAll(SELECTOR);
    for (var i = 0; i < regions.length; i++) {
      var region = regions[i];
      var scrolls = region.scrollWidth > region.clientWidth + 1 || region.scrollHeight > region.clientHeight + 1;
      if (scrolls && !region.hasAttribute("tabindex")) {
        region.setAttribute("tabindex", "0");
        region.setAttribute("data-scroll-region", "");
      } else if (!scrolls && region.hasAttribute("data-scroll-region")) {
        region.removeAttribute("tabindex");
        region.removeAttribute("data-scroll-region");
      }
    }
  }
  document.addEventListener("DOMContentLoaded", mark);
  document.addEventListener("htmx:afterSettle", mark);
  window.addEventListener("resize", mark);
}());
