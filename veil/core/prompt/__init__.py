"""What is sent to the model: assembling and fitting the prompt (``context``), lossless elision
(``elision``), full compaction (``compaction``, ``compaction_cut``), and the columnar item views
(``items``) and rule-based tags (``tags``) scorers read.
"""
