"""Options: Hudi's write and read options parsed once into frozen typed configs."""
