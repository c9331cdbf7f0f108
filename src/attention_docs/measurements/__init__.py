# Measurement records, the store they live in, and how they are keyed. No torch here.
from attention_docs.measurements.keys import fingerprint, store_key
from attention_docs.measurements.schema import (
    SCHEMA_VERSION,
    Measurement,
    NewerSchemaError,
    OpStat,
    Provenance,
    SchemaError,
    Sourced,
    StepStat,
    Table,
)
from attention_docs.measurements.store import Problem, Store

__all__ = [
    "SCHEMA_VERSION",
    "Measurement",
    "NewerSchemaError",
    "OpStat",
    "Problem",
    "Provenance",
    "SchemaError",
    "Sourced",
    "StepStat",
    "Store",
    "Table",
    "fingerprint",
    "store_key",
]
