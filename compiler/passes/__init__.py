"""IR -> IR passes, one per file, each a verb: `def quantize(ir, options) -> IR`."""
