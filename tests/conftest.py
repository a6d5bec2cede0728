import os
import warnings

import jax

jax.config.update("jax_enable_x64", True)
warnings.filterwarnings("ignore", category=FutureWarning)
os.environ.setdefault("TQDM_DISABLE", "1")
