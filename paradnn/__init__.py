"""paradnn: parameterized deep-learning benchmarks after ParaDnn (Wang, Wei, Brooks 2019).

Importing the package quiets TensorFlow's C++ start-up logging (CUDA probing, CPU
feature notes) unless the user set ``TF_CPP_MIN_LOG_LEVEL`` themselves; Python
exceptions are unaffected.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"

import importlib  # noqa: E402

# The subpackage paradnn.sweep is loaded before the function of that name is bound: the
# import system binds a subpackage to its parent's attribute when it first loads it, which
# would otherwise turn ``paradnn.sweep`` into the package as soon as a sweep had run.
importlib.import_module("paradnn.sweep")

from paradnn.api import describe, load, measure, sweep  # noqa: E402 - after the environment is set
from paradnn.checks import check_family  # noqa: E402

__all__ = ["__version__", "check_family", "describe", "load", "measure", "sweep"]
