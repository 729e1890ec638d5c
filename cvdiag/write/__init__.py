"""The emit side: the middleware, scopes and HTTP-client capture that write ``CVDIAG`` lines.

It imports the contract and never the read side, the diagnosis or the face. (Named
``write`` because ``cvdiag.emit`` is the public function that writes one line.)
"""
