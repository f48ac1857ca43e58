import sys
from pathlib import Path

# The helpers beside the tests (history.py, checks.py) import by name.
sys.path.insert(0, str(Path(__file__).parent))
