"""The contract between Python and the front end (``docs/widget-protocol.md``).

What the live widget (:mod:`iglens_viz.widget`, over anywidget) and the static page
(:mod:`iglens_viz.export`) both send to the same JS bundle: the result as a payload dict with
ndarray buffers (:mod:`.payload`, :mod:`.serializers`), the model's initial state
(:mod:`.state`) and where the built bundle lives (:mod:`.bundle`). Nothing here imports
anywidget; both transports sit on top of this package.
"""

from .payload import result_payload
from .serializers import array_from_payload, array_to_payload, to_base64_state
from .state import (
    COLOR_BY,
    DEFAULT_STATE,
    PAGE_WRITABLE,
    STATE,
    STATE_KEYS,
    VIEWS,
    ColorBy,
    StateKey,
    View,
    initial_state,
)

__all__ = [
    "COLOR_BY",
    "DEFAULT_STATE",
    "PAGE_WRITABLE",
    "STATE",
    "STATE_KEYS",
    "StateKey",
    "array_from_payload",
    "array_to_payload",
    "initial_state",
    "result_payload",
    "to_base64_state",
    "VIEWS",
    "ColorBy",
    "View",
]
