"""BERT model configuration: the fields of the original `bert_config.json`.

Example:

>>> from bert_keras.model.config import BertConfig
>>> config = BertConfig.from_preset("tiny")
>>> (config.num_hidden_layers, config.hidden_size, config.num_attention_heads)
(2, 128, 2)
>>> BertConfig.from_preset("L4_H256").intermediate_size
1024
"""

import dataclasses
import json
import os
import re

from bert_keras.common.errors import BertKerasError
from bert_keras.common.files import write_text_atomic

# The published sizes of the original release (L = layers, H = hidden size).
_NAMED_PRESETS = {
    "tiny": (2, 128),
    "mini": (4, 256),
    "small": (4, 512),
    "medium": (8, 512),
    "base": (12, 768),
    "large": (24, 1024),
}
# The 24 small models of the original release: L in {2..12} x H in {128..768}.
_GRID_LAYERS = (2, 4, 6, 8, 10, 12)
_GRID_HIDDEN = (128, 256, 512, 768)

SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_approximate", "relu", "tanh", "swish", "silu")


class ConfigError(BertKerasError):
    """A configuration file is missing, malformed or inconsistent."""


@dataclasses.dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder, named as in the original `bert_config.json`.

    `layer_norm_eps` is not in the original file (which hard-codes 1e-12); it is written and
    read alongside the original fields. Neither is `causal_attention`: True for a model
    pre-trained left to right (the paper's "LTR & No NSP" ablation, where each position attends
    only to itself and earlier positions), so that every step that builds its encoder (loading,
    fine-tuning, export) keeps the mask it was trained with; a file without it is bidirectional.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    causal_attention: bool = False

    def __post_init__(self):
        self.validate()

    def validate(self, source="config"):
        """Raises ConfigError naming `source` and the field when a value is unusable."""
        for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                      "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{source}: field '{field}' must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"{source}: hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}")
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ConfigError(
                f"{source}: field 'hidden_act' is {self.hidden_act!r}; supported: {SUPPORTED_ACTIVATIONS}")
        for field in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"{source}: field '{field}' must be in [0, 1), got {value!r}")
        if not isinstance(self.causal_attention, bool):
            raise ConfigError(f"{source}: field 'causal_attention' must be true or false, got "
                              f"{self.causal_attention!r}")

    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    # ---------------------------------------------------------------- presets
    @classmethod
    def from_preset(cls, name, **overrides):
        """A published size: tiny/mini/small/medium/base/large, or `L{layers}_H{hidden}`.

        Attention heads are H / 64 and the intermediate size is 4H, as in the original release.
        """
        if name in _NAMED_PRESETS:
            layers, hidden = _NAMED_PRESETS[name]
        else:
            match = re.fullmatch(r"L(\d+)_H(\d+)", name)
            if not match or int(match.group(1)) not in _GRID_LAYERS or int(match.group(2)) not in _GRID_HIDDEN:
                raise ConfigError(
                    f"unknown preset {name!r}; use one of {sorted(_NAMED_PRESETS)} or L{{2,4,6,8,10,12}}_"
                    f"H{{128,256,512,768}}, or a path to a bert_config.json")
            layers, hidden = int(match.group(1)), int(match.group(2))
        values = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=hidden // 64,
                      intermediate_size=4 * hidden)
        values.update(overrides)
        return cls(**values)

    @staticmethod
    def is_preset(name):
        """Whether `name` is a preset's name (`from_preset`)."""
        match = re.fullmatch(r"L(\d+)_H(\d+)", str(name))
        return str(name) in _NAMED_PRESETS or bool(
            match and int(match.group(1)) in _GRID_LAYERS and int(match.group(2)) in _GRID_HIDDEN)

    @staticmethod
    def preset_names():
        grid = [f"L{layers}_H{hidden}" for layers in _GRID_LAYERS for hidden in _GRID_HIDDEN]
        return list(_NAMED_PRESETS) + grid

    # ------------------------------------------------------------------- JSON
    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source="config"):
        """Builds a config from the original field names; unknown keys are ignored."""
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: expected a JSON object, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        missing = [name for name in ("vocab_size", "hidden_size", "num_hidden_layers",
                                     "num_attention_heads", "intermediate_size") if name not in values]
        if missing:
            raise ConfigError(f"{source}: missing required field(s) {missing}")
        kwargs = {key: value for key, value in values.items() if key in known}
        try:
            config = cls.__new__(cls)
            defaults = cls.__dataclass_fields__
            for name, field in defaults.items():
                setattr(config, name, kwargs.get(name, field.default))
            config.validate(source)
        except ConfigError:
            raise
        except Exception as error:  # pragma: no cover - defensive
            raise ConfigError(f"{source}: {error}") from error
        return config

    @classmethod
    def from_json_file(cls, path):
        """Reads an original `bert_config.json` (or a file of the same fields)."""
        values = _read_json(path)
        return cls.from_dict(values, source=str(path))

    @classmethod
    def from_hf_config(cls, path):
        """Reads a Hugging Face BERT `config.json` (`layer_norm_eps`, `model_type: bert`)."""
        values = _read_json(path)
        model_type = values.get("model_type", "bert")
        if model_type not in ("bert",):
            raise ConfigError(f"{path}: model_type is {model_type!r}, expected 'bert'")
        position_type = values.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ConfigError(f"{path}: position_embedding_type {position_type!r} is not supported")
        return cls.from_dict(values, source=str(path))

    def to_json_file(self, path):
        """Writes the original `bert_config.json` layout, atomically."""
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
        write_text_atomic(path, text)


def resolve_model_size(value, flag="preset", warn=True):
    """What a `--preset` value names: ("preset", name) or ("file", path).

    Names before paths: a preset's name is the preset even when a file or folder of that name
    is in the working directory (a warning names both); a value is a path when it looks like
    one (it has a path separator or ends in `.json`), or when it names an existing file and no
    preset.

    >>> resolve_model_size("tiny"), resolve_model_size("runs/bert_config.json")
    (('preset', 'tiny'), ('file', 'runs/bert_config.json'))
    """
    value = os.fspath(value)
    looks_like_path = (os.sep in value or "/" in value or (os.altsep or "/") in value
                       or value.endswith(".json"))
    if looks_like_path:
        return "file", value
    if BertConfig.is_preset(value):
        if warn and os.path.exists(value):
            import logging  # pylint: disable=import-outside-toplevel

            logging.getLogger("bert_keras").warning(
                "--%s=%s is the %s preset; the %s %s in the working directory is not read (pass "
                "--%s=%s to use it)", flag, value, value,
                "folder" if os.path.isdir(value) else "file", os.path.abspath(value), flag,
                os.path.join(".", value))
        return "preset", value
    if os.path.isfile(value):
        return "file", value
    return "preset", value


def config_from_size(value, vocab_size=None, flag="preset"):
    """The `BertConfig` a `--preset` value names (`resolve_model_size`): a preset, with
    `vocab_size` when given, or a config file."""
    kind, value = resolve_model_size(value, flag)
    if kind == "file":
        return BertConfig.from_json_file(value)
    return BertConfig.from_preset(value, **({} if vocab_size is None else
                                            {"vocab_size": vocab_size}))


def _read_json(path):
    if not os.path.exists(path):
        raise ConfigError(f"{path}: config file not found")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: malformed JSON ({error})") from error
