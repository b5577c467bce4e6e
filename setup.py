"""Package layout that pyproject.toml cannot express: the wheel also carries the workbench and the samples.

The library lives in `lib/`; the workbench app (`workbench/`), its pages (`pages/`) and the sample data
(`data_samples/`: traces, ALFWorld games, the tiny default model) stay at the top of the checkout. A
non-editable install needs them, so they are mapped to `worldsmith/_bundled/<folder>` in the wheel, the
same layout as the checkout, which `worldsmith._resources` reads. Everything else is in pyproject.toml.
"""

from setuptools import find_namespace_packages, find_packages, setup

BUNDLED = ("workbench", "pages", "data_samples")  # checkout folders shipped as worldsmith/_bundled/<folder>
_SKIP = ("*__pycache__*", "*.ipynb_checkpoints*")

bundled_dirs = {f"worldsmith._bundled.{folder}": folder for folder in BUNDLED}
bundled_packages = [
    f"worldsmith._bundled.{folder}.{sub}" if sub else f"worldsmith._bundled.{folder}"
    for folder in BUNDLED
    for sub in ["", *find_namespace_packages(folder, exclude=_SKIP)]
]

setup(
    packages=find_packages("lib") + bundled_packages,
    package_dir={"": "lib", **bundled_dirs},
    package_data={package: ["*"] for package in bundled_packages},
    exclude_package_data={"": ["*.pyc"]},
)
