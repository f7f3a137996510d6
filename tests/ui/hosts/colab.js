// A Colab-like host page for the browser tests (tests/ui/test_hosts.py).
//
// Colab renders a widget with its own widget manager (googlecolab/colab-cdn-widget-manager):
// `createWidgetManager(environment)`, where the environment hands it each model's serialized
// state, a comm per model, and nothing else; the manager then fetches the model's front end
// (here anywidget's) from jsDelivr with its own small AMD loader. `@cocalc/widgets` is CoCalc's
// repackaging of that manager (the same API and loader). This page implements the environment
// over a `@jupyterlab/services` connection to a real kernel on a loopback Jupyter server,
// runs the test's code there and renders every widget the code displays.
//
// `mode: "colab"` adds what Colab's manager is documented to do (googlecolab/
// colab-cdn-widget-manager#33): the binary buffers of `comm_open` are dropped (the state
// keeps their JSON, its `buffer` keys absent), and custom-message buffers arrive as
// `Uint8Array`s, not `DataView`s. `mode: "manager"` hands everything over as it came.
//
// Bundled by the test with the project's esbuild (no network); the page is served from the
// Jupyter server's origin by a Playwright route.
import { KernelManager, ServerConnection } from "@jupyterlab/services";
import { createWidgetManager } from "@cocalc/widgets";

const WIDGET_VIEW = "application/vnd.jupyter.widget-view+json";

/** Put `buffers` back into `state` at `paths` (ipywidgets' put_buffers, as Jupyter does). */
function putBuffers(state, paths, buffers) {
  paths.forEach((path, i) => {
    let obj = state;
    for (const key of path.slice(0, -1)) obj = obj[key];
    obj[path[path.length - 1]] = buffers[i];
  });
}

/** A deep copy of a comm message's JSON (the kernel's message objects stay untouched). */
const copy = (value) => JSON.parse(JSON.stringify(value));

/** An ipywidgets `IClassicComm` over a services comm; `colab` hands buffers as Uint8Array. */
function classicComm(comm, colab) {
  const asHost = (buffers) =>
    (buffers || []).map((b) =>
      colab ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : b,
    );
  return {
    comm_id: comm.commId,
    target_name: comm.targetName,
    open() {
      throw new Error("the kernel opened this comm");
    },
    send(data, callbacks, metadata, buffers) {
      const future = comm.send(data, metadata, buffers);
      future.onIOPub = (msg) => {
        callbacks?.iopub?.status && msg.header.msg_type === "status" && callbacks.iopub.status(msg);
      };
      future.onReply = (msg) => callbacks?.shell?.reply?.(msg);
      return future.msg.header.msg_id;
    },
    close() {
      comm.close();
    },
    on_msg(callback) {
      comm.onMsg = (msg) => callback({ ...msg, buffers: asHost(msg.buffers) });
    },
    on_close(callback) {
      comm.onClose = (msg) => callback(msg);
    },
  };
}

/**
 * Start a kernel, run `code`, render every widget it displays into `#outputs`.
 * @param {{baseUrl: string, token: string, kernelName: string, mode: "manager"|"colab"}} opts
 */
export async function start({ baseUrl, token, kernelName, mode }) {
  const colab = mode === "colab";
  const serverSettings = ServerConnection.makeSettings({
    baseUrl,
    wsUrl: baseUrl.replace(/^http/, "ws"),
    token,
    appendToken: true,
  });
  const kernels = new KernelManager({ serverSettings });
  const kernel = await kernels.startNew({ name: kernelName });
  // Colab (and VS Code) handle comm messages on the kernel's main shell; JupyterLab 4.4+ may
  // send each comm's messages to a subshell of its own, which hides a comm handler that blocks.
  kernel.commsOverSubshells = "disabled";
  const opened = new Map(); // comm id → {comm, msg}
  kernel.registerCommTarget("jupyter.widget", (comm, msg) => {
    opened.set(comm.commId, { comm, msg });
  });
  const environment = {
    async getSerializedModelState(modelId) {
      const found = opened.get(modelId);
      if (!found) return undefined;
      const { state, buffer_paths = [] } = found.msg.content.data;
      const out = copy(state);
      if (!colab) putBuffers(out, buffer_paths, found.msg.buffers || []);
      return {
        modelName: out._model_name,
        modelModule: out._model_module,
        modelModuleVersion: out._model_module_version,
        state: out,
      };
    },
    async openCommChannel({ comm_id }) {
      const found = opened.get(comm_id);
      if (!found) throw new Error(`no comm ${comm_id} opened by the kernel`);
      return classicComm(found.comm, colab);
    },
    async renderOutput() {
      throw new Error("not used");
    },
    async loadClass() {
      return undefined; // the manager's own loader (the CDN) finds the module
    },
  };
  const manager = createWidgetManager(environment);
  const host = {
    kernel,
    manager,
    rendered: [],
    errors: [],
    /** Run `code` in the kernel; each widget it displays renders into a new `.host-output`. */
    async run(code) {
      const future = kernel.requestExecute({ code });
      const renders = [];
      future.onIOPub = (msg) => {
        const view = msg.content?.data?.[WIDGET_VIEW];
        if (view && ["display_data", "execute_result"].includes(msg.header.msg_type)) {
          const out = document.createElement("div");
          out.className = "host-output";
          out.dataset.modelId = view.model_id;
          document.querySelector("#outputs").appendChild(out);
          renders.push(
            manager.render(view.model_id, out).then(
              () => host.rendered.push(view.model_id),
              (err) => host.errors.push(String(err && err.stack ? err.stack : err)),
            ),
          );
        } else if (msg.header.msg_type === "error") {
          host.errors.push(`${msg.content.ename}: ${msg.content.evalue}`);
        }
      };
      const reply = await future.done;
      await Promise.all(renders);
      return reply.content.status;
    },
  };
  return host;
}
