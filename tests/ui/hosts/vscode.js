// A VS Code-like host page for the browser tests (tests/ui/test_hosts.py).
//
// VS Code's Jupyter extension renders widgets in its notebook webview with
// `@vscode/jupyter-ipywidgets8`: requirejs on the page, `activate()` then `load()` define
// `@jupyter-widgets/base|controls|output` for requirejs and hand out `vscIPyWidgets.
// WidgetManager(kernel, element, scriptLoader, logger, widgetState)` over a kernel connection.
// A module the manager does not have (anywidget) is asked of the script loader, which in VS
// Code finds it in the kernel environment's `share/jupyter/nbextensions/<module>/index.js`
// (its local widget script source) and registers that file with requirejs. This page does the
// same over a `@jupyterlab/services` kernel connection to a loopback Jupyter server: the
// environment's nbextensions folder is served by that server (an extra static path). Comm
// messages go to the main shell, as VS Code sends them (no subshells).
//
// Bundled by the test with the project's esbuild (no network); requirejs (npm) is loaded by a
// script tag before this module.
import { KernelManager, ServerConnection } from "@jupyterlab/services";
import { activate } from "@vscode/jupyter-ipywidgets8/dist/ipywidgets.js";

const WIDGET_VIEW = "application/vnd.jupyter.widget-view+json";

/**
 * Start a kernel, run `code`, render every widget it displays into `#outputs`.
 * @param {{baseUrl: string, token: string, kernelName: string, nbextensions: string}} opts
 *   nbextensions: the URL of the environment's share/jupyter/nbextensions folder
 */
export async function start({ baseUrl, token, kernelName, nbextensions }) {
  const serverSettings = ServerConnection.makeSettings({
    baseUrl,
    wsUrl: baseUrl.replace(/^http/, "ws"),
    token,
    appendToken: true,
  });
  const kernels = new KernelManager({ serverSettings });
  const kernel = await kernels.startNew({ name: kernelName });
  kernel.commsOverSubshells = "disabled";
  activate();
  window.vscIPyWidgets8.load();
  const loaded = [];
  const scriptLoader = {
    widgetsRegisteredInRequireJs: new Set(),
    // VS Code's local script source: <prefix>/share/jupyter/nbextensions/<module>/index.js
    async loadWidgetScript(moduleName, moduleVersion) {
      loaded.push(`${moduleName}@${moduleVersion}`);
      window.requirejs.config({ paths: { [moduleName]: `${nbextensions}/${moduleName}/index` } });
      scriptLoader.widgetsRegisteredInRequireJs.add(moduleName);
    },
    successHandler() {},
    errorHandler(className, moduleName, moduleVersion, error) {
      host.errors.push(`could not load ${className} from ${moduleName}@${moduleVersion}: ${error}`);
    },
  };
  const outputs = document.querySelector("#outputs");
  const manager = new window.vscIPyWidgets.WidgetManager(kernel, outputs, scriptLoader, () => {}, undefined);
  const host = {
    kernel,
    manager,
    loaded,
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
          outputs.appendChild(out);
          const renderer = manager.rendermime.createRenderer(WIDGET_VIEW);
          renders.push(
            renderer.renderModel({ data: { [WIDGET_VIEW]: view }, metadata: {}, trusted: true }).then(
              () => {
                out.appendChild(renderer.node);
                renderer.processMessage?.({ type: "after-attach" });
                host.rendered.push(view.model_id);
              },
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
