"""What pyproject.toml cannot say: the sample dataset and the JSON Schemas stay at the top of the
repository (data/sample, schemas) and ship inside the package as ``toolkit._sample`` and
``toolkit._schemas`` (read with importlib.resources; their files are listed in pyproject.toml's
package-data). Their sub-folders are listed as packages too, or setuptools warns about them."""

from setuptools import find_namespace_packages, find_packages, setup

RESOURCES = {"toolkit._sample": "data/sample", "toolkit._schemas": "schemas"}
resource_packages = [f"{name}.{sub}" if sub else name for name, folder in RESOURCES.items()
                     for sub in ["", *find_namespace_packages(where=folder)]]
setup(packages=find_packages(include=["toolkit", "toolkit.*"]) + resource_packages, package_dir=RESOURCES)
