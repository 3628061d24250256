"""Stage 6, Result: the answer as plain data (records, reasons, diagnosis), ready for any renderer."""
