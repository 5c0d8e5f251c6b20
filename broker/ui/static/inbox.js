// Progressive: the list reloads itself while it is visible and nobody is typing. Without
// JavaScript the page's "Refresh" link does the same.
(function () {
  var list = document.querySelector("[data-refresh-s]");
  if (!list) return;
  var every = Number(list.getAttribute("data-refresh-s")) * 1000;
  if (!(every > 0)) return;
  setInterval(function () {
    var active = document.activeElement;
    var typing = active && (active.tagName === "INPUT" || active.tagName === "TEXTAREA");
    if (!document.hidden && !typing) window.location.reload();
  }, every);
})();
