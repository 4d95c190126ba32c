"""The read path: query -> plan -> seeds -> typed expansion -> scored candidates -> budgeted pack."""
