"use strict";
// The review page: every text from the data block goes in as textContent (never as markup); the work is
// kept in localStorage under this review's id and leaves the page only as a JSON file the reviewer saves.
(function () {
  const data = JSON.parse(document.getElementById("review-data").textContent);
  const LABELS = { met: "met", not_met: "not met", unsure: "unsure" };
  const KEYS = { "1": "met", m: "met", "2": "not_met", n: "not_met", "3": "unsure", u: "unsure" };
  const storageKey = "bedside-review:" + data.review_id;
  const answers = [];
  data.cases.forEach(function (c, ci) {
    c.answers.forEach(function (a, ai) { answers.push({ caseIndex: ci, answerIndex: ai, c: c, a: a }); });
  });
  const totalItems = answers.reduce(function (n, x) { return n + x.c.items.length; }, 0);
  let state = { reviewer: "", labels: {}, answer: 0, item: 0 };
  let storageOk = true;

  function $(id) { return document.getElementById(id); }

  function load() {
    try {
      const saved = window.localStorage.getItem(storageKey);
      if (saved) {
        const parsed = JSON.parse(saved);
        if (parsed && typeof parsed === "object" && parsed.labels && typeof parsed.labels === "object") {
          state = Object.assign(state, parsed);
        }
      }
    } catch (e) {
      storageOk = false;
    }
    state.answer = Math.min(Math.max(0, state.answer | 0), Math.max(0, answers.length - 1));
  }

  function save() {
    try {
      window.localStorage.setItem(storageKey, JSON.stringify(state));
    } catch (e) {
      storageOk = false;
    }
    notice(storageOk ? "" : "This browser does not keep the work of this page (local storage is off): export before you close it.");
  }

  function notice(text) {
    const el = $("notice");
    el.textContent = text;
    el.hidden = !text;
  }

  function labelOf(blindId, itemId) {
    const entry = (state.labels[blindId] || {})[itemId];
    return entry ? entry.label : null;
  }

  function countLabelled() {
    let n = 0;
    Object.keys(state.labels).forEach(function (b) { n += Object.keys(state.labels[b]).length; });
    return n;
  }

  function render() {
    const cur = answers[state.answer];
    const done = countLabelled();
    $("progress").max = Math.max(1, totalItems);
    $("progress").value = done;
    $("progress-text").textContent = answers.length ?
      "answer " + (state.answer + 1) + " of " + answers.length + " · " + done + " of " + totalItems + " items labelled" :
      "nothing to review";
    if (!cur) { return; }
    $("case-title").textContent = "Case " + (cur.caseIndex + 1) + " of " + data.cases.length;
    $("prompt").textContent = cur.c.prompt;
    $("answer-title").textContent = "Answer " + (cur.answerIndex + 1) + " of " + cur.c.answers.length +
      " (blinded id " + cur.a.blind_id + ")";
    $("answer").textContent = cur.a.text;
    const list = $("items");
    while (list.firstChild) { list.removeChild(list.firstChild); }
    state.item = Math.min(Math.max(0, state.item | 0), Math.max(0, cur.c.items.length - 1));
    cur.c.items.forEach(function (item, i) {
      const li = document.createElement("li");
      li.className = i === state.item ? "current" : "";
      li.dataset.itemId = item.item_id;
      const points = document.createElement("span");
      points.className = "points";
      points.textContent = (item.points > 0 ? "+" : "") + item.points;
      const text = document.createElement("span");
      text.className = "item-text";
      text.textContent = item.text;
      const choices = document.createElement("div");
      choices.className = "choices";
      Object.keys(LABELS).forEach(function (value) {
        const b = document.createElement("button");
        b.type = "button";
        b.className = value;
        b.textContent = LABELS[value];
        b.setAttribute("aria-pressed", String(labelOf(cur.a.blind_id, item.item_id) === value));
        b.addEventListener("click", function () { state.item = i; setLabel(value); });
        choices.appendChild(b);
      });
      li.appendChild(points);
      li.appendChild(text);
      li.appendChild(choices);
      list.appendChild(li);
    });
    const current = list.children[state.item];
    if (current && current.scrollIntoView) { current.scrollIntoView({ block: "nearest" }); }
  }

  function setLabel(value) {
    const cur = answers[state.answer];
    if (!cur || !cur.c.items.length) { return; }
    const item = cur.c.items[state.item];
    const mine = state.labels[cur.a.blind_id] || (state.labels[cur.a.blind_id] = {});
    if (value === null) {
      delete mine[item.item_id];
    } else {
      mine[item.item_id] = { label: value, at: new Date().toISOString() };
      if (state.item < cur.c.items.length - 1) { state.item += 1; }
    }
    save();
    render();
  }

  function moveItem(step) {
    const cur = answers[state.answer];
    if (!cur) { return; }
    state.item = Math.min(Math.max(0, state.item + step), Math.max(0, cur.c.items.length - 1));
    save();
    render();
  }

  function moveAnswer(step) {
    const next = Math.min(Math.max(0, state.answer + step), Math.max(0, answers.length - 1));
    if (next !== state.answer) {
      state.answer = next;
      state.item = 0;
      save();
      render();
      window.scrollTo(0, 0);
    }
  }

  function exportLabels() {
    const reviewer = state.reviewer.trim();
    if (!reviewer) {
      notice("Type your name first (press r), then export.");
      $("reviewer").focus();
      return;
    }
    const labels = [];
    answers.forEach(function (x) {
      const mine = state.labels[x.a.blind_id] || {};
      x.c.items.forEach(function (item) {
        const entry = mine[item.item_id];
        if (entry) {
          labels.push({ blind_id: x.a.blind_id, item_id: item.item_id, label: entry.label, labelled_at: entry.at });
        }
      });
    });
    const body = JSON.stringify({ format: "bedside-review-labels 1", review_id: data.review_id, reviewer: reviewer,
      exported_at: new Date().toISOString(), labels: labels }, null, 1);
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([body], { type: "application/json" }));
    link.download = "labels-" + data.review_id + "-" + reviewer.replace(/[^A-Za-z0-9_-]+/g, "_") + ".json";
    document.body.appendChild(link);
    link.click();
    document.body.removeChild(link);
    notice("");
    $("progress-text").textContent += " · exported " + labels.length + " labels";
  }

  const reviewerInput = $("reviewer");
  reviewerInput.addEventListener("input", function () { state.reviewer = reviewerInput.value; save(); });
  reviewerInput.addEventListener("keydown", function (event) {
    if (event.key === "Enter" || event.key === "Escape") { event.preventDefault(); reviewerInput.blur(); }
  });
  $("export").addEventListener("click", exportLabels);
  $("prev").addEventListener("click", function () { moveAnswer(-1); });
  $("next").addEventListener("click", function () { moveAnswer(1); });

  document.addEventListener("keydown", function (event) {
    if (event.target === reviewerInput || event.altKey || event.ctrlKey || event.metaKey) { return; }
    const key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    let handled = true;
    if (Object.prototype.hasOwnProperty.call(KEYS, key)) { setLabel(KEYS[key]); }
    else if (key === "0" || key === "Backspace") { setLabel(null); }
    else if (key === "j" || key === "ArrowDown") { moveItem(1); }
    else if (key === "k" || key === "ArrowUp") { moveItem(-1); }
    else if (key === "l" || key === "ArrowRight") { moveAnswer(1); }
    else if (key === "h" || key === "ArrowLeft") { moveAnswer(-1); }
    else if (key === "r") { reviewerInput.focus(); }
    else if (key === "e") { exportLabels(); }
    else { handled = false; }
    if (handled) { event.preventDefault(); }
  });

  load();
  reviewerInput.value = state.reviewer;
  save();
  render();
  if (!state.reviewer) { reviewerInput.focus(); }
})();
