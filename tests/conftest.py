"""The tests mirror the package's subpackages; their shared helpers stay in this directory."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
