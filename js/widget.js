/**
 * iglens_viz front end: the anywidget entry point.
 *
 * Default export: `{ render }` (anywidget's front-end module contract; render returns a
 * cleanup function). Named exports `createModel` and `mount` serve the static HTML export
 * (no named `render`: anywidget >= 0.9 flags it as deprecated).
 * @module widget
 */
import "./styles/widget.css";
import "./styles/views.css";
import "./styles/lesson.css";
import "./styles/prompt.css";
import { render } from "./views/app.js";

export { createModel, mount } from "./standalone.js";
// Only the default export carries `render`: anywidget warns about a named `render` export.
export default { render };
