"""BedsideBench datasets: a checkout in the upstream layout or one case file, loaded in the reference
runner's order, validated against the JSON Schemas, digested, and turned into the store's case tables."""

from toolkit.dataset._load import (PROJECT_ROOT, Dataset, DatasetError, Problem, default_dataset_path, digest,
                                   item_id_for, load_dataset, resource_dir, sample_dataset_path, schema_path,
                                   validate_dataset)

__all__ = ["PROJECT_ROOT", "Dataset", "DatasetError", "Problem", "default_dataset_path", "digest", "item_id_for",
           "load_dataset", "resource_dir", "sample_dataset_path", "schema_path", "validate_dataset"]
