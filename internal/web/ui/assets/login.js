// weir web UI's login page: exchanges the REST API's token for a session
// cookie (POST /login), from the form or from the URL's fragment
// (#token=..., which leaves the address bar at once), then opens the UI
// at the route the fragment names (#/jobs/...), if any. <body> gets
// data-ready "login" when the form waits and "login-failed" after a
// refused token, which tests wait for.
"use strict";
(function () {
  const form = document.getElementById("login");
  const input = document.getElementById("token");
  const error = document.getElementById("error");

  // The fragment holds either a route of the UI or token=... (URL-encoded;
  // "+" is kept, not read as a space).
  let route = location.hash.startsWith("#/") ? location.hash : "";
  let token = null;
  for (const part of location.hash.replace(/^#/, "").split("&")) {
    if (part.startsWith("token=")) {
      try { token = decodeURIComponent(part.slice(6)); } catch (e) { token = part.slice(6); }
    }
  }
  if (token !== null) history.replaceState(null, "", location.pathname + location.search);

  function open() { location.replace("/" + route); }

  async function login(tok) {
    error.textContent = "";
    const r = await fetch("/login", {
      method: "POST", body: new URLSearchParams({ token: tok }),
      credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" },
    });
    if (r.ok) { open(); return; }
    let msg = r.status + " " + r.statusText;
    try { const b = await r.json(); if (b && b.errors) msg = b.errors.join("; "); } catch (e) { /* not JSON */ }
    error.textContent = msg;
    document.body.dataset.ready = "login-failed";
  }

  function fail(e) {
    error.textContent = String(e && e.message ? e.message : e);
    document.body.dataset.ready = "login-failed";
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    login(input.value).catch(fail);
  });

  (async function () {
    if (token) { await login(token); return; }
    // A session cookie is SameSite=Strict: a link from another site opens
    // this page without it, but a request from here carries it.
    try {
      const r = await fetch("/overview", { credentials: "same-origin", cache: "no-store" });
      if (r.ok) { open(); return; }
    } catch (e) { /* offline: show the form */ }
    document.body.dataset.ready = "login";
  })().catch(fail);
})();
