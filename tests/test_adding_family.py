"""docs/adding-a-family.md works as written: its first Python block, saved as a module, is a family.

The block is saved as ``paradnn/families/vgg16.py`` in a copy of the package, with no
other edit, and the copy is run in fresh interpreters: the CLI describes VGG16 with the
parameter count Keras gives, ``check_family`` passes and the registry lists it as a real
workload.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def first_python_block(path: Path) -> str:
    match = re.search(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)
    assert match, f"{path} has no python block"
    return match.group(1)


@pytest.fixture(scope="module")
def package_with_vgg16(tmp_path_factory) -> Path:
    """A copy of the paradnn package with the documented module added, and nothing else changed."""
    root = tmp_path_factory.mktemp("plugin")
    shutil.copytree(ROOT / "paradnn", root / "paradnn", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "paradnn" / "families" / "vgg16.py").write_text(first_python_block(ROOT / "docs" / "adding-a-family.md"))
    return root


def run(root: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_documented_module_is_described_by_the_cli(package_with_vgg16):
    from paradnn.tfimport import keras

    model = keras.applications.VGG16(weights=None, input_shape=(32, 32, 3))
    expected = sum(math.prod(w.shape) for w in model.trainable_weights)  # counted here, not by paradnn
    record = json.loads(run(package_with_vgg16, "-m", "paradnn.cli", "describe", "vgg16", "image_32-bs_2", "--json"))
    assert record["family"] == "vgg16" and record["label"] == "image_32-bs_2"
    assert record["params"] == expected


def test_the_documented_module_conforms_and_is_a_real_workload(package_with_vgg16):
    code = (
        "from paradnn import check_family, families\n"
        "assert 'vgg16' in families.of_role('workload'), families.of_role('workload')\n"
        "check_family(families.get('vgg16'))\n"
        "print('conforms')\n"
    )
    assert run(package_with_vgg16, "-c", code).strip().endswith("conforms")
