// lahar dashboard: live updates. The pages work without this file; with it, each "changed" event from /events
// (one stream per tab, fed by the server's shared watches) re-fetches <main> of the page shown and swaps it in.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var live = document.getElementById("live");
  if (!main || !window.EventSource) { return; }
  var busy = false, again = false;
  function openDetails() {
    var open = {};
    main.querySelectorAll("[data-job] > details[open]").forEach(function (d) { open[d.parentNode.dataset.job] = 1; });
    return open;
  }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    var open = openDetails();
    fetch(location.pathname + "?fragment=1", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
      .then(function (html) {
        main.innerHTML = html;
        main.querySelectorAll("[data-job] > details").forEach(function (d) {
          if (open[d.parentNode.dataset.job]) { d.open = true; }
        });
        main.dataset.refreshed = String(Date.now());
        live.textContent = "live · updated " + new Date().toLocaleTimeString();
      })
      .catch(function (err) { live.textContent = "update failed (" + err.message + ")"; })
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  var source = new EventSource("/events");
  source.addEventListener("hello", function () { live.textContent = "live"; });
  source.addEventListener("changed", refresh);
  source.onerror = function () { live.textContent = "reconnecting…"; };
})();
