import sys
from pathlib import Path

# The tests share helpers (tiny_models.py) that live beside them.
sys.path.insert(0, str(Path(__file__).parent))
