"""Package layout that pyproject.toml cannot express: two packages from two folders, and bundled data.

The library lives in `lib/` (`worldsmith`); the Streamlit workbench is the top-level package `workbench`
(`workbench/`, its entry script `workbench/app.py`), installed beside it, editable or not, so its modules import
it by name with no `sys.path` set-up. The page scripts (`pages/`, run by Streamlit as files, never imported)
and the sample data (`data_samples/`: traces, ALFWorld games, the tiny default model) stay at the top of the
checkout; a non-editable install needs them, so they are mapped to `worldsmith/_bundled/<folder>` in the wheel,
the same layout as the checkout, which `worldsmith._resources` reads. Everything else is in pyproject.toml.
"""

from setuptools import find_namespace_packages, find_packages, setup

BUNDLED = ("pages", "data_samples")  # checkout folders shipped as worldsmith/_bundled/<folder>
_SKIP = ("*__pycache__*", "*.ipynb_checkpoints*")

workbench_packages = ["workbench", *(f"workbench.{sub}" for sub in find_packages("workbench"))]
bundled_dirs = {f"worldsmith._bundled.{folder}": folder for folder in BUNDLED}
bundled_packages = [
    f"worldsmith._bundled.{folder}.{sub}" if sub else f"worldsmith._bundled.{folder}"
    for folder in BUNDLED
    for sub in ["", *find_namespace_packages(folder, exclude=_SKIP)]
]

setup(
    packages=find_packages("lib") + workbench_packages + bundled_packages,
    package_dir={"": "lib", "workbench": "workbench", **bundled_dirs},
    package_data={package: ["*"] for package in bundled_packages},
    exclude_package_data={"": ["*.pyc"]},
)
