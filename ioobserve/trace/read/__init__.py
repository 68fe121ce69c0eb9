"""Reading traces back: members inflated, lines parsed, ids named, as Polars frames."""
