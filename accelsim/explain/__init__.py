"""Teaching views (`accelsim explain`): pictures and animations drawn from the models, never from separate code.

Invariant: what an explanation shows is what a model computed; the explanation only labels and lays it out.
"""
