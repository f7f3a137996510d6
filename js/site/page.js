/**
 * The kernel-free site's page: load the model once, ask a question, draw the widget's views
 * of the answer (`mount` from js/standalone.js). Progress while it runs; Cancel stops between
 * graph calls. Token text reaches the DOM only through the views (textContent).
 * @module site/page
 */
import { mount } from "../standalone.js";
import { makeChat } from "./chat.js";
import { Cancelled, createSessions, fetchModel, runQuestion } from "./engine.js";
import { createLessonPicker, lessonCaption, lessonEntries, loadLesson } from "./lessons.js";
import { buildPayload } from "./payload.js";
import { canVerify, fetchCheckedJson } from "./verify.js";

/** @param {string} tag @param {Record<string, string>} [attrs] @param {string} [text] */
function el(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.textContent = text;
  return node;
}

/**
 * The backends to try, best first: WebGPU where the browser has it, then WebAssembly
 * (multi-threaded only when the page is cross-origin isolated).
 * @param {any} ort
 */
export function chooseBackends(ort) {
  const isolated = globalThis.crossOriginIsolated === true;
  const cores = globalThis.navigator?.hardwareConcurrency ?? 1;
  ort.env.wasm.numThreads = isolated ? Math.max(1, Math.min(4, cores)) : 1;
  const gpu = "gpu" in (globalThis.navigator ?? {});
  return { backends: gpu ? ["webgpu", "wasm"] : ["wasm"], isolated, threads: ort.env.wasm.numThreads };
}

/**
 * @param {{threads: number, isolated: boolean}} choice @param {string} backend
 */
export function backendText(choice, backend) {
  if (backend === "webgpu") return "Backend: WebGPU";
  const why = choice.isolated
    ? ""
    : " (the page is not cross-origin isolated: serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp for several threads)";
  return `Backend: WebAssembly, ${choice.threads} thread${choice.threads === 1 ? "" : "s"}${why}`;
}

/** The page's header: status, backend, the question form, progress, answer, lesson line. */
function buildHeader() {
  const header = el("div", { class: "iglens-site-header" });
  const status = el("p", { class: "iglens-site-status", "data-testid": "site-status", role: "status" }, "Loading the model…");
  const backendLine = el("p", { class: "iglens-site-backend", "data-testid": "site-backend" });
  const form = el("form", { class: "iglens-site-form" });
  const input = /** @type {HTMLInputElement} */ (el("input", { type: "text", "aria-label": "Question", "data-testid": "site-question", size: "50" }));
  input.value = "What is the capital of France?";
  const ask = /** @type {HTMLButtonElement} */ (el("button", { type: "submit", "data-testid": "site-ask" }, "Ask"));
  const cancel = /** @type {HTMLButtonElement} */ (el("button", { type: "button", "data-testid": "site-cancel" }, "Cancel"));
  const bar = /** @type {HTMLProgressElement} */ (el("progress", { "data-testid": "site-progress", max: "1", value: "0" }));
  const answer = el("p", { class: "iglens-site-answer", "data-testid": "site-answer" });
  const check = el("p", { class: "iglens-site-check", "data-testid": "site-check" });
  const lessonLine = el("p", { class: "iglens-site-check", "data-testid": "site-lesson" });
  ask.disabled = true;
  cancel.disabled = true;
  form.append(input, ask, cancel);
  header.append(status, backendLine, form, bar, answer, check, lessonLine);
  return { header, status, backendLine, form, input, ask, cancel, bar, answer, check, lessonLine };
}

/** @param {import("./engine.js").Progress} p */
export function progressText(p) {
  const mb = (/** @type {number} */ x) => (x / 1e6).toFixed(0);
  return p.phase === "download"
    ? `Downloading the model: ${mb(p.loaded)} / ${mb(p.total)} MB`
    : p.phase === "generate"
      ? `Generating: ${p.loaded} of at most ${p.total} tokens`
      : p.phase === "predict"
        ? `Reading each position's prediction: ${p.loaded} / ${p.total}`
        : `Reading every block: ${p.loaded} / ${p.total} states`;
}

/**
 * Build the page in `root` and load the site at `base`.
 * @param {HTMLElement} root
 * @param {{ort: any, base: string, maxNewTokens?: number}} options
 */
export async function startSite(root, { ort, base, maxNewTokens = 12 }) {
  const { header, status, backendLine, form, input, ask, cancel, bar, answer, check, lessonLine } = buildHeader();
  const view = el("div", { class: "iglens-site-view" });
  root.append(header, view);

  /** @type {Record<string, any>} */
  const site = { timings: {}, state: "loading" };
  /** @type {any} */ (globalThis).iglensSite = site;
  const t0 = performance.now();
  /** @type {AbortController|null} */
  let running = null;
  /** @type {{destroy: () => void}|null} */
  let mounted = null;
  // each view shown takes a ticket: a lesson still loading when a question is answered (or
  // another lesson is picked) is not shown over it
  let ticket = 0;
  /** @param {Record<string, any>} state */
  const show = (state) => {
    mounted?.destroy();
    view.replaceChildren();
    mounted = mount(view, state);
  };
  /** @param {import("./engine.js").Progress} p */
  const progress = (p) => {
    bar.max = Math.max(1, p.total);
    bar.value = p.loaded;
    status.textContent = progressText(p);
  };
  cancel.addEventListener("click", () => running?.abort());

  try {
    const manifest = await (await fetch(base + "manifest.json")).json();
    const lessons = lessonEntries(manifest);
    /** @param {number} i */
    const showLesson = async (i) => {
      const mine = ++ticket;
      try {
        const state = await loadLesson(base, manifest, lessons[i]);
        if (mine !== ticket) return;
        show(state);
        lessonLine.textContent = lessonCaption(lessons[i]);
        answer.textContent = "";
        check.textContent = "";
        site.lesson = { index: i, question: lessons[i].question, positions: lessons[i].positions };
      } catch (err) {
        if (mine === ticket) lessonLine.textContent = `Could not show the lesson: ${err}`;
      }
    };
    const picker = createLessonPicker(lessons, (i) => void showLesson(i));
    if (picker) header.insertBefore(picker, lessonLine);
    // the first lesson at first paint, before and independent of the model's sessions
    const firstLesson = lessons.length ? showLesson(0) : Promise.resolve();
    site.lessonShown = firstLesson.then(() => (site.timings.lesson_ms = performance.now() - t0));
    const [tokenizerJson, chatJson] = await Promise.all(
      [manifest.tokenizer.tokenizer, manifest.tokenizer.chat].map((f) => fetchCheckedJson(base, f, manifest)),
    );
    const chat = makeChat(tokenizerJson, chatJson);
    site.verified = canVerify();
    const bytes = await fetchModel(base, manifest, progress, undefined, site.timings);
    site.timings.download_ms = performance.now() - t0;
    status.textContent = "Preparing the model…";
    const choice = chooseBackends(ort);
    const model = await createSessions(ort, manifest, bytes, choice.backends);
    bytes.clear();
    site.backend = model.backend;
    backendLine.textContent = backendText(choice, model.backend);
    site.timings.model_load_ms = performance.now() - t0;
    status.textContent = "Ready: type a question.";
    ask.disabled = false;
    site.state = "ready";

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (running) return;
      const question = input.value.trim();
      if (!question) return;
      running = new AbortController();
      ask.disabled = true;
      cancel.disabled = false;
      site.state = "running";
      answer.textContent = "";
      check.textContent = "";
      const start = performance.now();
      try {
        const { ids, templatePositions } = chat.encode(question);
        const reading = await runQuestion(ort, model, manifest, ids, {
          maxNewTokens,
          eosId: chat.eosId,
          signal: running.signal,
          onProgress: progress,
        });
        const built = buildPayload({
          question,
          ...reading,
          promptLength: ids.length,
          templatePositions,
          nBlocks: manifest.model.n_blocks,
          topK: manifest.model.top_k,
          maxNewTokens,
          modelName: manifest.model.name,
          family: manifest.model.family ?? "",
          decode: chat.decode,
        });
        const generated = reading.inputIds.slice(ids.length);
        answer.textContent =
          "Answer: " +
          generated
            .filter((id) => id !== chat.eosId)
            .map(chat.decode)
            .join("");
        check.textContent = `Σ contributions − Δp: at most ${built.completeness.toExponential(1)} over ${reading.inputIds.length} positions (float32)`;
        ticket++;
        show({ result: built.payload, selected: built.selected });
        lessonLine.textContent = "";
        if (picker) picker.value = "";
        site.lesson = null;
        await new Promise((resolve) => requestAnimationFrame(resolve));
        Object.assign(site, {
          payload: built.payload,
          completeness: built.completeness,
          generated,
          // plain copies for checks from outside the page (tests/export/test_site_page.py)
          inputIds: reading.inputIds,
          targetIds: Array.from(reading.targetIds),
          lensProbs: Array.from(reading.lensProbs),
          state: "done",
        });
        site.timings.question_ms = performance.now() - start;
        status.textContent = `Answered in ${(site.timings.question_ms / 1000).toFixed(1)} s.`;
      } catch (err) {
        if (err instanceof Cancelled) {
          status.textContent = "Cancelled.";
          site.state = "cancelled";
        } else {
          status.textContent = `Could not answer: ${err}`;
          site.state = "error";
          site.error = String(err);
        }
      } finally {
        running = null;
        ask.disabled = false;
        cancel.disabled = true;
      }
    });
  } catch (err) {
    status.textContent = `Could not load the model: ${err}`;
    site.state = "error";
    site.error = String(err);
  }
}
