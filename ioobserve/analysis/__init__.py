"""Analysis of recorded events: named LazyFrame -> LazyFrame steps over the reader's frames
(columns of ioobserve.data.schema). Nothing here prints; the CLI presents what it returns."""
