// familiar web panel: live parts and forms without reloads. No dependencies.
// - [data-sse="url"]: an EventSource; event "replace" sets the element's HTML, "append"
//   appends to it, "close" closes the stream. A redrawn part keeps the reader's place:
//   the steps they opened stay open and the control they had focused keeps the focus.
// - form[data-async]: submitted with fetch (CSRF header from <meta name="csrf-token">);
//   the answer replaces the content of #<data-target>, or the page reloads.
// - form[data-confirm="question"]: asks before submitting.
"use strict";
(function () {
  var csrf = function () {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  };

  var streams = new WeakMap();

  // A control is found again after a redraw by what it is, says and points to; a step
  // (<details>) and its summary by their position, as their text changes while they run.
  function keyOf(el, node) {
    if (node.tagName === "DETAILS" || node.tagName === "SUMMARY") {
      var details = node.tagName === "DETAILS" ? node : node.parentElement;
      return node.tagName + "#" + Array.prototype.indexOf.call(el.querySelectorAll("details"), details);
    }
    var attrs = ["id", "name", "value", "href", "aria-label", "data-task"].map(function (a) {
      return node.getAttribute(a) || "";
    });
    return [node.tagName].concat(attrs, [node.textContent.trim()]).join("\u0000");
  }

  function redraw(el, html) {
    var focused = document.activeElement;
    var focusKey = focused && focused !== el && el.contains(focused) ? keyOf(el, focused) : null;
    var open = Array.prototype.map.call(el.querySelectorAll("details[open]"), function (d) {
      return keyOf(el, d);
    });
    el.innerHTML = html;
    el.querySelectorAll("details").forEach(function (d) {
      if (open.indexOf(keyOf(el, d)) >= 0) d.open = true;
    });
    if (!focusKey) return;
    var again = Array.prototype.find.call(el.querySelectorAll(focused.tagName), function (n) {
      return keyOf(el, n) === focusKey;
    });
    if (again) again.focus({ preventScroll: true });
  }

  function connect(root) {
    var found = root.querySelectorAll ? root.querySelectorAll("[data-sse]") : [];
    var all = Array.prototype.slice.call(found);
    if (root.hasAttribute && root.hasAttribute("data-sse")) all.unshift(root);
    all.forEach(function (el) {
      if (streams.has(el)) return;
      var source = new EventSource(el.getAttribute("data-sse"));
      streams.set(el, source);
      source.addEventListener("replace", function (event) {
        redraw(el, event.data);
        connect(el);
        el.dispatchEvent(new CustomEvent("familiar:updated", { bubbles: true }));
      });
      source.addEventListener("append", function (event) {
        el.insertAdjacentHTML("beforeend", event.data);
        connect(el);
        el.dispatchEvent(new CustomEvent("familiar:updated", { bubbles: true }));
      });
      source.addEventListener("close", function () { source.close(); });
    });
  }

  function showError(form, text) {
    var box = form.querySelector("[data-error]");
    if (box) { box.textContent = text; box.setAttribute("role", "alert"); }
    else { window.alert(text); }
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { event.preventDefault(); return; }
    if (!form.hasAttribute("data-async")) return;
    event.preventDefault();
    var data = new FormData(form, event.submitter || undefined);
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    fetch(form.action, {
      method: (form.getAttribute("method") || "post").toUpperCase(),
      body: new URLSearchParams(data),
      headers: { "X-CSRF-Token": csrf(), "X-Familiar-Async": "1" },
      credentials: "same-origin",
    }).then(function (response) {
      return response.text().then(function (text) {
        if (!response.ok) { showError(form, text || response.statusText); return; }
        var targetId = form.getAttribute("data-target");
        var target = targetId ? document.getElementById(targetId) : null;
        if (!target) { window.location.reload(); return; }
        target.innerHTML = text;
        connect(target);
        if (form.hasAttribute("data-reset") && form.isConnected) form.reset();
        target.dispatchEvent(new CustomEvent("familiar:updated", { bubbles: true }));
      });
    }).catch(function (error) {
      showError(form, "the gateway did not answer: " + error);
    }).finally(function () {
      buttons.forEach(function (b) { b.disabled = false; });
    });
  });

  document.addEventListener("DOMContentLoaded", function () { connect(document); });
})();
