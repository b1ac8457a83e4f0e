"""paradnn: parameterized deep-learning benchmarks after ParaDnn (Wang, Wei, Brooks 2019).

Importing the package quiets TensorFlow's C++ start-up logging (CUDA probing, CPU
feature notes) unless the user set ``TF_CPP_MIN_LOG_LEVEL`` themselves; Python
exceptions are unaffected.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from paradnn.api import describe, load, measure, merge, project, sweep  # noqa: E402 - after the environment is set
from paradnn.checks import check_family  # noqa: E402
from paradnn.version import __version__  # noqa: E402

__all__ = ["__version__", "check_family", "describe", "load", "measure", "merge", "project", "sweep"]
