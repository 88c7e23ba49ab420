// Citation badges: clicking [n] in an answer scrolls to (and briefly highlights) its source card.
// The card may be re-rendered right after the click (selecting an earlier answer), so retry briefly.
(function () {
  function reveal(id, tries) {
    var card = document.getElementById(id);
    if (!card) {
      if (tries > 0) setTimeout(function () { reveal(id, tries - 1); }, 120);
      return;
    }
    card.scrollIntoView({ behavior: "smooth", block: "nearest" });
    card.classList.remove("flash");
    void card.offsetWidth;
    card.classList.add("flash");
  }
  document.addEventListener("click", function (event) {
    var link = event.target && event.target.closest ? event.target.closest("a.cite") : null;
    if (!link) return;
    var href = link.getAttribute("href") || "";
    if (href.charAt(0) !== "#") return;
    event.preventDefault();
    reveal(href.slice(1), 12);
  }, true);
})();
