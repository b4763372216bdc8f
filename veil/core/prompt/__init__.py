"""What is sent to the model: assembling and fitting the prompt (``context``; repeated-line
elision is default plugin ``veil.elision``, through the ``elide_messages`` hook), full compaction (``compaction``, ``compaction_cut``), and the columnar item views
(``items``) and rule-based tags (``tags``) scorers read.
"""
