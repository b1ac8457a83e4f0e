"""The reports' sections: one module per report (the notebook of that name calls it), plus what they share.

``common`` holds what every notebook calls (``prepare``, ``ensure_measured``, ``load``,
``show``, ``caption``); ``infeed`` the input-pipeline sections two reports share.
"""
