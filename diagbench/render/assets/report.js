// Opens the attempt a link points at (grid cells and verdicts link to their attempts),
// and the "open all" / "close all" buttons. Nothing is fetched.
(function () {
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.tagName === "DETAILS") {
      target.open = true;
      target.scrollIntoView({ block: "center" });
    }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.querySelectorAll("[data-toggle-all]").forEach(function (button) {
    button.addEventListener("click", function () {
      var open = button.getAttribute("data-toggle-all") === "open";
      document.querySelectorAll("details.attempt").forEach(function (d) { d.open = open; });
    });
  });
})();
