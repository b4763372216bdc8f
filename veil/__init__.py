"""veil: a memory and context-management layer for LLM coding agents, and its plugin API.

Everything a plugin may use is exported here (and in :mod:`veil.hookspecs`, :mod:`veil.testing`);
a plugin imports nothing from ``veil.core``, whose modules may change without notice
(``tests/test_public_api.py`` reads every plugin module and holds them to it). The names, by
what they are for:

- hooks: :data:`hookimpl` marks an implementation; the hooks themselves are documented in
  :mod:`veil.hookspecs`;
- the types a hook receives or returns (:class:`ContextItem`, :class:`Tool`,
  :class:`ToolResult`, :class:`PromptSection`, :class:`EvictionPlan`, ...) and the errors a
  plugin raises or catches (:class:`VeilError` and its subclasses);
- :class:`PluginSession` and :class:`PluginVeil`: what a plugin may read and call on the
  session and the application it is handed;
- front ends (the REPL, HTTP, MCP, proxy and replay plugins): :func:`open_veil`, :class:`Veil`,
  :class:`Session` and the functions that record a turn;
- settings: :class:`Config`, :func:`load_config` and :class:`SettingsSection`, the base of every
  section a plugin declares through ``register_settings``;
- secrets: :data:`PLACEHOLDER_PATTERN` (what a redacted secret looks like in text),
  :func:`placeholders`, :class:`Redactor`;
- the prompt's texts and items, compaction's mechanism, models and token counts, files written
  safely, tool processes, and the store access a plugin is given (its tables' statements,
  :class:`Store` for the plugins that own tables there).

``import veil`` stays cheap (``veil --help`` imports it): every name but :data:`hookimpl` is
imported from its module on first use (PEP 562 ``__getattr__``); the ``TYPE_CHECKING`` imports
below tell type checkers and the API reference what each name is.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from veil.hookspecs import hookimpl

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from veil.cli import store_option as store_option
    from veil.core import context_ops as context_ops
    from veil.core.app import Veil as Veil
    from veil.core.app import ensure_gitignore as ensure_gitignore
    from veil.core.app import open_veil as open_veil
    from veil.core.atomic import atomic_write_bytes as atomic_write_bytes
    from veil.core.background import start_loader as start_loader
    from veil.core.errors import AgentNotFound as AgentNotFound
    from veil.core.errors import BadRequest as BadRequest
    from veil.core.errors import CompactionDisabled as CompactionDisabled
    from veil.core.errors import CompactionRejected as CompactionRejected
    from veil.core.errors import ConfigError as ConfigError
    from veil.core.errors import NotAvailable as NotAvailable
    from veil.core.errors import PluginHookFailed as PluginHookFailed
    from veil.core.errors import PluginResultInvalid as PluginResultInvalid
    from veil.core.errors import PromptTooLarge as PromptTooLarge
    from veil.core.errors import ProviderError as ProviderError
    from veil.core.errors import SessionBusy as SessionBusy
    from veil.core.errors import SessionClosed as SessionClosed
    from veil.core.errors import SessionConflict as SessionConflict
    from veil.core.errors import SessionNotFound as SessionNotFound
    from veil.core.errors import TurnInterrupted as TurnInterrupted
    from veil.core.errors import UnsafePath as UnsafePath
    from veil.core.errors import UnsafeVeilPath as UnsafeVeilPath
    from veil.core.errors import VeilError as VeilError
    from veil.core.jsonio import MAX_DEPTH as MAX_DEPTH
    from veil.core.jsonio import loads as json_loads
    from veil.core.models.context_refusal import RefusalFigures as RefusalFigures
    from veil.core.models.context_refusal import is_context_refusal as is_context_refusal
    from veil.core.models.context_refusal import refusal_figures as refusal_figures
    from veil.core.models.embedder import CachedEmbedder as CachedEmbedder
    from veil.core.models.embedder import EmbeddingUnavailableError as EmbeddingUnavailableError
    from veil.core.models.llm import LLM as LLM
    from veil.core.models.llm import ChatModel as ChatModel
    from veil.core.models.llm import Completion as Completion
    from veil.core.models.llm import ContextWindowExceededError as ContextWindowExceededError
    from veil.core.models.llm import LocalModel as LocalModel
    from veil.core.models.llm import Route as ProviderRoute
    from veil.core.models.llm import error_body_text as error_body_text
    from veil.core.models.llm import is_retryable_error as is_retryable_error
    from veil.core.models.llm import message_from_response as message_from_response
    from veil.core.models.llm import redact as redact
    from veil.core.models.llm import user_auth_text as user_auth_text
    from veil.core.models.offline import import_litellm as import_litellm
    from veil.core.models.tokens import cl100k_count as cl100k_count
    from veil.core.models.tokens import content_text as content_text
    from veil.core.models.tokens import count_message_tokens as count_message_tokens
    from veil.core.models.tokens import count_text_tokens as count_text_tokens
    from veil.core.plugins import call_impl as call_impl
    from veil.core.plugins import checked_list as checked_list
    from veil.core.plugins import results_by_plugin as results_by_plugin
    from veil.core.prompt.assemble import NOTE_PREFIX as NOTE_PREFIX
    from veil.core.prompt.assemble import SUMMARY_PREFIX as SUMMARY_PREFIX
    from veil.core.prompt.assemble import completion_reserve as completion_reserve
    from veil.core.prompt.assemble import context_report as context_report
    from veil.core.prompt.compaction import auto_stopped as auto_compaction_stopped
    from veil.core.prompt.compaction import conversation_tokens as conversation_tokens
    from veil.core.prompt.compaction import (
        default_compaction_settings as default_compaction_settings,
    )
    from veil.core.prompt.compaction import just_compacted as just_compacted
    from veil.core.prompt.compaction import record_failure as record_compaction_failure
    from veil.core.prompt.compaction import run_default as run_default_compaction
    from veil.core.prompt.compaction import visible as has_visible_text
    from veil.core.prompt.compaction_cut import content_text as content_text_with_parts
    from veil.core.prompt.context import build_prompt as build_prompt
    from veil.core.prompt.excerpts import shown_lines as shown_lines
    from veil.core.prompt.items import BatchChange as BatchChange
    from veil.core.prompt.items import ItemBatch as ItemBatch
    from veil.core.prompt.tags import content_identifiers as content_identifiers
    from veil.core.prompt.tags import distinct_runs as distinct_runs
    from veil.core.prompt.tags import extract_tags as extract_tags
    from veil.core.prompt.tags import extract_targets as extract_targets
    from veil.core.prompt.tags import identifier_tokens as identifier_tokens
    from veil.core.prompt.tags import item_identifiers as item_identifiers
    from veil.core.prompt.tags import paths_in as paths_in
    from veil.core.prompt.tags import tags_text as tags_text
    from veil.core.safety.paths import VEIL_DIR_NAME as VEIL_DIR_NAME
    from veil.core.safety.paths import append_bytes_nofollow as append_bytes_nofollow
    from veil.core.safety.paths import checked as checked_veil_path
    from veil.core.safety.paths import read_bytes_nofollow as read_bytes_nofollow
    from veil.core.safety.paths import refuse_links as refuse_links
    from veil.core.safety.paths import remove_interrupted_temps as remove_interrupted_temps
    from veil.core.safety.paths import veil_dir_of as veil_dir_of
    from veil.core.safety.paths import veil_file as veil_file
    from veil.core.safety.permissions import PROMPT_CHOICES as PROMPT_CHOICES
    from veil.core.safety.permissions import PathDenial as PathDenial
    from veil.core.safety.permissions import PermissionRequest as PermissionRequest
    from veil.core.safety.permissions import parse_answer as parse_answer
    from veil.core.safety.permissions import path_denial as path_denial
    from veil.core.safety.processes import KILL_GRACE_SECONDS as KILL_GRACE_SECONDS
    from veil.core.safety.processes import ShuttingDownError as ShuttingDownError
    from veil.core.safety.processes import finished as process_finished
    from veil.core.safety.processes import kill_group as kill_group
    from veil.core.safety.processes import shutdown as stop_tool_processes
    from veil.core.safety.processes import signal_group as signal_group
    from veil.core.safety.processes import start_group as start_group
    from veil.core.safety.prompt_trust import CLIENT_PROMPT_SOURCE as CLIENT_PROMPT_SOURCE
    from veil.core.safety.redaction import Redactor as Redactor
    from veil.core.safety.redaction import environment_secrets as environment_secrets
    from veil.core.safety.redaction import has_placeholder as has_placeholder
    from veil.core.safety.redaction import placeholders as placeholders
    from veil.core.safety.secret_formats import PLACEHOLDER_PATTERN as PLACEHOLDER_PATTERN
    from veil.core.safety.trust import filter_project_options as filter_project_options
    from veil.core.session import Session as Session
    from veil.core.session_api import PluginSession as PluginSession
    from veil.core.session_api import PluginVeil as PluginVeil
    from veil.core.session_locks import SessionLocks as SessionLocks
    from veil.core.settings import AGENT_NAME_RE as AGENT_NAME_RE
    from veil.core.settings import LOOPBACK_HOSTS as LOOPBACK_HOSTS
    from veil.core.settings import MAX_ENTRY_BYTES as MAX_ENTRY_BYTES
    from veil.core.settings import MAX_FILE_BYTES as MAX_FILE_BYTES
    from veil.core.settings import CompactionSettings as CompactionSettings
    from veil.core.settings import Config as Config
    from veil.core.settings import MemorySettings as MemorySettings
    from veil.core.settings import SettingsSection as SettingsSection
    from veil.core.settings import check_http_token as check_http_token
    from veil.core.settings import is_loopback as is_loopback
    from veil.core.settings import load_config as load_config
    from veil.core.settings import user_config_dir as user_config_dir
    from veil.core.settings import validate_agent_name as validate_agent_name
    from veil.core.shared_files import FileChange as FileChange
    from veil.core.shared_files import SharedFiles as SharedFiles
    from veil.core.shared_files import open_shared_files as open_shared_files
    from veil.core.store import Store as Store
    from veil.core.store import raw_rows as raw_rows
    from veil.core.store import recall_tables as recall_tables
    from veil.core.store import row_codec as row_codec
    from veil.core.store.connection import connect as connect_sqlite
    from veil.core.store.context_db import insert_event as insert_event
    from veil.core.store.dialect import fts5_match as fts5_match
    from veil.core.store.plugin_tables import Migration as Migration
    from veil.core.text import clean_message as clean_message
    from veil.core.tiers import SEARCHABLE_TIERS as SEARCHABLE_TIERS
    from veil.core.tiers import Tiers as Tiers
    from veil.core.tiers import cold_text as cold_text
    from veil.core.tiers import decompress as decompress
    from veil.core.turn import end_iteration as end_iteration
    from veil.core.turn import record_assistant as record_assistant
    from veil.core.turn import record_tool_call as record_tool_call
    from veil.core.turn import record_tool_result as record_tool_result
    from veil.core.turn import record_user as record_user
    from veil.core.types import ITEM_KINDS as ITEM_KINDS
    from veil.core.types import TIERS as TIERS
    from veil.core.types import TOOL_EFFECTS as TOOL_EFFECTS
    from veil.core.types import Attempt as Attempt
    from veil.core.types import CaptureEvent as CaptureEvent
    from veil.core.types import CompactionPlan as CompactionPlan
    from veil.core.types import CompactResult as CompactResult
    from veil.core.types import ContextItem as ContextItem
    from veil.core.types import EvictionPlan as EvictionPlan
    from veil.core.types import ItemScores as ItemScores
    from veil.core.types import LazyScores as LazyScores
    from veil.core.types import Message as Message
    from veil.core.types import Outcome as Outcome
    from veil.core.types import PromptSection as PromptSection
    from veil.core.types import RecallHit as RecallHit
    from veil.core.types import RenderEvent as RenderEvent
    from veil.core.types import Route as Route
    from veil.core.types import RouteHandler as RouteHandler
    from veil.core.types import RouteRequest as RouteRequest
    from veil.core.types import RouteResponse as RouteResponse
    from veil.core.types import SlashCommand as SlashCommand
    from veil.core.types import Summary as Summary
    from veil.core.types import Tool as Tool
    from veil.core.types import ToolContext as ToolContext
    from veil.core.types import ToolEffect as ToolEffect
    from veil.core.types import ToolHandler as ToolHandler
    from veil.core.types import ToolResult as ToolResult
    from veil.core.types import new_id as new_id
    from veil.core.types import seeded_ids as seeded_ids
    from veil.harness import VeilHarness as VeilHarness

_EXPORTS: dict[str, tuple[str, str | None]] = {
    # Types a hook receives or returns
    "Message": ("veil.core.types", "Message"),
    "Outcome": ("veil.core.types", "Outcome"),
    "ITEM_KINDS": ("veil.core.types", "ITEM_KINDS"),
    "TIERS": ("veil.core.types", "TIERS"),
    "TOOL_EFFECTS": ("veil.core.types", "TOOL_EFFECTS"),
    "ToolEffect": ("veil.core.types", "ToolEffect"),
    "ToolHandler": ("veil.core.types", "ToolHandler"),
    "RouteHandler": ("veil.core.types", "RouteHandler"),
    "new_id": ("veil.core.types", "new_id"),
    "seeded_ids": ("veil.core.types", "seeded_ids"),
    "ContextItem": ("veil.core.types", "ContextItem"),
    "CaptureEvent": ("veil.core.types", "CaptureEvent"),
    "ToolResult": ("veil.core.types", "ToolResult"),
    "ToolContext": ("veil.core.types", "ToolContext"),
    "Tool": ("veil.core.types", "Tool"),
    "PromptSection": ("veil.core.types", "PromptSection"),
    "RenderEvent": ("veil.core.types", "RenderEvent"),
    "RouteRequest": ("veil.core.types", "RouteRequest"),
    "RouteResponse": ("veil.core.types", "RouteResponse"),
    "Route": ("veil.core.types", "Route"),
    "SlashCommand": ("veil.core.types", "SlashCommand"),
    "Attempt": ("veil.core.types", "Attempt"),
    "Summary": ("veil.core.types", "Summary"),
    "CompactResult": ("veil.core.types", "CompactResult"),
    "CompactionPlan": ("veil.core.types", "CompactionPlan"),
    "ItemScores": ("veil.core.types", "ItemScores"),
    "RecallHit": ("veil.core.types", "RecallHit"),
    "EvictionPlan": ("veil.core.types", "EvictionPlan"),
    "LazyScores": ("veil.core.types", "LazyScores"),
    # Errors
    "VeilError": ("veil.core.errors", "VeilError"),
    "ConfigError": ("veil.core.errors", "ConfigError"),
    "BadRequest": ("veil.core.errors", "BadRequest"),
    "UnsafePath": ("veil.core.errors", "UnsafePath"),
    "UnsafeVeilPath": ("veil.core.errors", "UnsafeVeilPath"),
    "AgentNotFound": ("veil.core.errors", "AgentNotFound"),
    "SessionNotFound": ("veil.core.errors", "SessionNotFound"),
    "SessionClosed": ("veil.core.errors", "SessionClosed"),
    "SessionBusy": ("veil.core.errors", "SessionBusy"),
    "SessionConflict": ("veil.core.errors", "SessionConflict"),
    "CompactionDisabled": ("veil.core.errors", "CompactionDisabled"),
    "CompactionRejected": ("veil.core.errors", "CompactionRejected"),
    "NotAvailable": ("veil.core.errors", "NotAvailable"),
    "PromptTooLarge": ("veil.core.errors", "PromptTooLarge"),
    "ProviderError": ("veil.core.errors", "ProviderError"),
    "TurnInterrupted": ("veil.core.errors", "TurnInterrupted"),
    "PluginHookFailed": ("veil.core.errors", "PluginHookFailed"),
    "PluginResultInvalid": ("veil.core.errors", "PluginResultInvalid"),
    # What a plugin may use of a session and of the application
    "PluginSession": ("veil.core.session_api", "PluginSession"),
    "PluginVeil": ("veil.core.session_api", "PluginVeil"),
    # Front ends: opening veil, driving a session
    "Veil": ("veil.core.app", "Veil"),
    "open_veil": ("veil.core.app", "open_veil"),
    "ensure_gitignore": ("veil.core.app", "ensure_gitignore"),
    "Session": ("veil.core.session", "Session"),
    "SessionLocks": ("veil.core.session_locks", "SessionLocks"),
    "VeilHarness": ("veil.harness", "VeilHarness"),
    "store_option": ("veil.cli", "store_option"),
    "start_loader": ("veil.core.background", "start_loader"),
    "record_user": ("veil.core.turn", "record_user"),
    "record_assistant": ("veil.core.turn", "record_assistant"),
    "record_tool_call": ("veil.core.turn", "record_tool_call"),
    "record_tool_result": ("veil.core.turn", "record_tool_result"),
    "end_iteration": ("veil.core.turn", "end_iteration"),
    "context_ops": ("veil.core.context_ops", None),
    # Settings and the sections plugins extend
    "Config": ("veil.core.settings", "Config"),
    "load_config": ("veil.core.settings", "load_config"),
    "SettingsSection": ("veil.core.settings", "SettingsSection"),
    "MemorySettings": ("veil.core.settings", "MemorySettings"),
    "CompactionSettings": ("veil.core.settings", "CompactionSettings"),
    "MAX_ENTRY_BYTES": ("veil.core.settings", "MAX_ENTRY_BYTES"),
    "MAX_FILE_BYTES": ("veil.core.settings", "MAX_FILE_BYTES"),
    "AGENT_NAME_RE": ("veil.core.settings", "AGENT_NAME_RE"),
    "validate_agent_name": ("veil.core.settings", "validate_agent_name"),
    "LOOPBACK_HOSTS": ("veil.core.settings", "LOOPBACK_HOSTS"),
    "is_loopback": ("veil.core.settings", "is_loopback"),
    "check_http_token": ("veil.core.settings", "check_http_token"),
    "user_config_dir": ("veil.core.settings", "user_config_dir"),
    "filter_project_options": ("veil.core.safety.trust", "filter_project_options"),
    "default_compaction_settings": ("veil.core.prompt.compaction", "default_compaction_settings"),
    # Secrets and their placeholders
    "PLACEHOLDER_PATTERN": ("veil.core.safety.secret_formats", "PLACEHOLDER_PATTERN"),
    "placeholders": ("veil.core.safety.redaction", "placeholders"),
    "has_placeholder": ("veil.core.safety.redaction", "has_placeholder"),
    "environment_secrets": ("veil.core.safety.redaction", "environment_secrets"),
    "Redactor": ("veil.core.safety.redaction", "Redactor"),
    "redact": ("veil.core.models.llm", "redact"),
    "CLIENT_PROMPT_SOURCE": ("veil.core.safety.prompt_trust", "CLIENT_PROMPT_SOURCE"),
    # The prompt: notes, summaries, items, tags
    "NOTE_PREFIX": ("veil.core.prompt.assemble", "NOTE_PREFIX"),
    "SUMMARY_PREFIX": ("veil.core.prompt.assemble", "SUMMARY_PREFIX"),
    "build_prompt": ("veil.core.prompt.context", "build_prompt"),
    "completion_reserve": ("veil.core.prompt.assemble", "completion_reserve"),
    "context_report": ("veil.core.prompt.assemble", "context_report"),
    "ItemBatch": ("veil.core.prompt.items", "ItemBatch"),
    "BatchChange": ("veil.core.prompt.items", "BatchChange"),
    "shown_lines": ("veil.core.prompt.excerpts", "shown_lines"),
    "clean_message": ("veil.core.text", "clean_message"),
    "content_identifiers": ("veil.core.prompt.tags", "content_identifiers"),
    "distinct_runs": ("veil.core.prompt.tags", "distinct_runs"),
    "extract_tags": ("veil.core.prompt.tags", "extract_tags"),
    "extract_targets": ("veil.core.prompt.tags", "extract_targets"),
    "identifier_tokens": ("veil.core.prompt.tags", "identifier_tokens"),
    "item_identifiers": ("veil.core.prompt.tags", "item_identifiers"),
    "paths_in": ("veil.core.prompt.tags", "paths_in"),
    "tags_text": ("veil.core.prompt.tags", "tags_text"),
    # Compaction mechanism
    "conversation_tokens": ("veil.core.prompt.compaction", "conversation_tokens"),
    "has_visible_text": ("veil.core.prompt.compaction", "visible"),
    "just_compacted": ("veil.core.prompt.compaction", "just_compacted"),
    "auto_compaction_stopped": ("veil.core.prompt.compaction", "auto_stopped"),
    "record_compaction_failure": ("veil.core.prompt.compaction", "record_failure"),
    "run_default_compaction": ("veil.core.prompt.compaction", "run_default"),
    "content_text_with_parts": ("veil.core.prompt.compaction_cut", "content_text"),
    # Models and tokens
    "LLM": ("veil.core.models.llm", "LLM"),
    "ChatModel": ("veil.core.models.llm", "ChatModel"),
    "Completion": ("veil.core.models.llm", "Completion"),
    "ContextWindowExceededError": ("veil.core.models.llm", "ContextWindowExceededError"),
    "LocalModel": ("veil.core.models.llm", "LocalModel"),
    "ProviderRoute": ("veil.core.models.llm", "Route"),
    "is_retryable_error": ("veil.core.models.llm", "is_retryable_error"),
    "error_body_text": ("veil.core.models.llm", "error_body_text"),
    "message_from_response": ("veil.core.models.llm", "message_from_response"),
    "user_auth_text": ("veil.core.models.llm", "user_auth_text"),
    "import_litellm": ("veil.core.models.offline", "import_litellm"),
    "CachedEmbedder": ("veil.core.models.embedder", "CachedEmbedder"),
    "EmbeddingUnavailableError": ("veil.core.models.embedder", "EmbeddingUnavailableError"),
    "RefusalFigures": ("veil.core.models.context_refusal", "RefusalFigures"),
    "is_context_refusal": ("veil.core.models.context_refusal", "is_context_refusal"),
    "refusal_figures": ("veil.core.models.context_refusal", "refusal_figures"),
    "cl100k_count": ("veil.core.models.tokens", "cl100k_count"),
    "content_text": ("veil.core.models.tokens", "content_text"),
    "count_message_tokens": ("veil.core.models.tokens", "count_message_tokens"),
    "count_text_tokens": ("veil.core.models.tokens", "count_text_tokens"),
    # Calling other plugins' hooks
    "call_impl": ("veil.core.plugins", "call_impl"),
    "checked_list": ("veil.core.plugins", "checked_list"),
    "results_by_plugin": ("veil.core.plugins", "results_by_plugin"),
    # Files, paths and processes
    "atomic_write_bytes": ("veil.core.atomic", "atomic_write_bytes"),
    "MAX_DEPTH": ("veil.core.jsonio", "MAX_DEPTH"),
    "json_loads": ("veil.core.jsonio", "loads"),
    "VEIL_DIR_NAME": ("veil.core.safety.paths", "VEIL_DIR_NAME"),
    "checked_veil_path": ("veil.core.safety.paths", "checked"),
    "append_bytes_nofollow": ("veil.core.safety.paths", "append_bytes_nofollow"),
    "read_bytes_nofollow": ("veil.core.safety.paths", "read_bytes_nofollow"),
    "refuse_links": ("veil.core.safety.paths", "refuse_links"),
    "remove_interrupted_temps": ("veil.core.safety.paths", "remove_interrupted_temps"),
    "veil_dir_of": ("veil.core.safety.paths", "veil_dir_of"),
    "veil_file": ("veil.core.safety.paths", "veil_file"),
    "PROMPT_CHOICES": ("veil.core.safety.permissions", "PROMPT_CHOICES"),
    "PathDenial": ("veil.core.safety.permissions", "PathDenial"),
    "PermissionRequest": ("veil.core.safety.permissions", "PermissionRequest"),
    "parse_answer": ("veil.core.safety.permissions", "parse_answer"),
    "path_denial": ("veil.core.safety.permissions", "path_denial"),
    "KILL_GRACE_SECONDS": ("veil.core.safety.processes", "KILL_GRACE_SECONDS"),
    "process_finished": ("veil.core.safety.processes", "finished"),
    "kill_group": ("veil.core.safety.processes", "kill_group"),
    "signal_group": ("veil.core.safety.processes", "signal_group"),
    "start_group": ("veil.core.safety.processes", "start_group"),
    "stop_tool_processes": ("veil.core.safety.processes", "shutdown"),
    "ShuttingDownError": ("veil.core.safety.processes", "ShuttingDownError"),
    # The store a plugin is given
    "Store": ("veil.core.store", "Store"),
    "insert_event": ("veil.core.store.context_db", "insert_event"),
    "fts5_match": ("veil.core.store.dialect", "fts5_match"),
    "connect_sqlite": ("veil.core.store.connection", "connect"),
    "Migration": ("veil.core.store.plugin_tables", "Migration"),
    "recall_tables": ("veil.core.store.recall_tables", None),
    "raw_rows": ("veil.core.store.raw_rows", None),
    "row_codec": ("veil.core.store.row_codec", None),
    "SharedFiles": ("veil.core.shared_files", "SharedFiles"),
    "FileChange": ("veil.core.shared_files", "FileChange"),
    "open_shared_files": ("veil.core.shared_files", "open_shared_files"),
    "Tiers": ("veil.core.tiers", "Tiers"),
    "SEARCHABLE_TIERS": ("veil.core.tiers", "SEARCHABLE_TIERS"),
    "cold_text": ("veil.core.tiers", "cold_text"),
    "decompress": ("veil.core.tiers", "decompress"),
}
"""Public name -> (module it is defined in, attribute there; None: the module itself)."""

__all__ = [
    "__version__",
    # Hooks
    "hookimpl",
    # Types a hook receives or returns
    "Message",
    "Outcome",
    "ITEM_KINDS",
    "TIERS",
    "TOOL_EFFECTS",
    "ToolEffect",
    "ToolHandler",
    "RouteHandler",
    "new_id",
    "seeded_ids",
    "ContextItem",
    "CaptureEvent",
    "ToolResult",
    "ToolContext",
    "Tool",
    "PromptSection",
    "RenderEvent",
    "RouteRequest",
    "RouteResponse",
    "Route",
    "SlashCommand",
    "Attempt",
    "Summary",
    "CompactResult",
    "CompactionPlan",
    "ItemScores",
    "RecallHit",
    "EvictionPlan",
    "LazyScores",
    # Errors
    "VeilError",
    "ConfigError",
    "BadRequest",
    "UnsafePath",
    "UnsafeVeilPath",
    "AgentNotFound",
    "SessionNotFound",
    "SessionClosed",
    "SessionBusy",
    "SessionConflict",
    "CompactionDisabled",
    "CompactionRejected",
    "NotAvailable",
    "PromptTooLarge",
    "ProviderError",
    "TurnInterrupted",
    "PluginHookFailed",
    "PluginResultInvalid",
    # What a plugin may use of a session and of the application
    "PluginSession",
    "PluginVeil",
    # Front ends: opening veil, driving a session
    "Veil",
    "open_veil",
    "ensure_gitignore",
    "Session",
    "SessionLocks",
    "VeilHarness",
    "store_option",
    "start_loader",
    "record_user",
    "record_assistant",
    "record_tool_call",
    "record_tool_result",
    "end_iteration",
    "context_ops",
    # Settings and the sections plugins extend
    "Config",
    "load_config",
    "SettingsSection",
    "MemorySettings",
    "CompactionSettings",
    "MAX_ENTRY_BYTES",
    "MAX_FILE_BYTES",
    "AGENT_NAME_RE",
    "validate_agent_name",
    "LOOPBACK_HOSTS",
    "is_loopback",
    "check_http_token",
    "user_config_dir",
    "filter_project_options",
    "default_compaction_settings",
    # Secrets and their placeholders
    "PLACEHOLDER_PATTERN",
    "placeholders",
    "has_placeholder",
    "environment_secrets",
    "Redactor",
    "redact",
    "CLIENT_PROMPT_SOURCE",
    # The prompt: notes, summaries, items, tags
    "NOTE_PREFIX",
    "SUMMARY_PREFIX",
    "build_prompt",
    "completion_reserve",
    "context_report",
    "ItemBatch",
    "BatchChange",
    "shown_lines",
    "clean_message",
    "content_identifiers",
    "distinct_runs",
    "extract_tags",
    "extract_targets",
    "identifier_tokens",
    "item_identifiers",
    "paths_in",
    "tags_text",
    # Compaction mechanism
    "conversation_tokens",
    "has_visible_text",
    "just_compacted",
    "auto_compaction_stopped",
    "record_compaction_failure",
    "run_default_compaction",
    "content_text_with_parts",
    # Models and tokens
    "LLM",
    "ChatModel",
    "Completion",
    "ContextWindowExceededError",
    "LocalModel",
    "ProviderRoute",
    "is_retryable_error",
    "error_body_text",
    "message_from_response",
    "user_auth_text",
    "import_litellm",
    "CachedEmbedder",
    "EmbeddingUnavailableError",
    "RefusalFigures",
    "is_context_refusal",
    "refusal_figures",
    "cl100k_count",
    "content_text",
    "count_message_tokens",
    "count_text_tokens",
    # Calling other plugins' hooks
    "call_impl",
    "checked_list",
    "results_by_plugin",
    # Files, paths and processes
    "atomic_write_bytes",
    "MAX_DEPTH",
    "json_loads",
    "VEIL_DIR_NAME",
    "checked_veil_path",
    "append_bytes_nofollow",
    "read_bytes_nofollow",
    "refuse_links",
    "remove_interrupted_temps",
    "veil_dir_of",
    "veil_file",
    "PROMPT_CHOICES",
    "PathDenial",
    "PermissionRequest",
    "parse_answer",
    "path_denial",
    "KILL_GRACE_SECONDS",
    "process_finished",
    "kill_group",
    "signal_group",
    "start_group",
    "stop_tool_processes",
    "ShuttingDownError",
    # The store a plugin is given
    "Store",
    "insert_event",
    "fts5_match",
    "connect_sqlite",
    "Migration",
    "recall_tables",
    "raw_rows",
    "row_codec",
    "SharedFiles",
    "FileChange",
    "open_shared_files",
    "Tiers",
    "SEARCHABLE_TIERS",
    "cold_text",
    "decompress",
]


def __getattr__(name: str) -> Any:
    """An exported name, imported from its module when it is asked for (PEP 562).

    It is looked up in its module each time rather than kept here, so that ``from veil import
    X`` inside a function sees what ``X``'s module holds at that moment (a test that patches
    ``veil.core.app.open_veil`` patches it for the plugins too).

    Raises:
        AttributeError: ``name`` is not part of veil's API.
    """
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'veil' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    return module if attribute is None else getattr(module, attribute)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
