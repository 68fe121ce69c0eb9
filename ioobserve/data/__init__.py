"""The data contracts: the ring record, the event columns, the operations, the shared types and sums."""
