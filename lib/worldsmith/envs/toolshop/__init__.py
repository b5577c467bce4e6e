"""Toolshop: a stateful customer-service tool API of our own (users, orders, products, tickets).

A testbed for simulators that must learn what writes do, what queries find and when calls fail:
one seeded database shared by every task of that seed (cross-episode entities), ~20 tools with
OpenAI schemas (reads, queries by attribute, writes answering with the updated record, failures
in several styles), 20,000 distinct customer goals per seed and an expert that reaches them.
"""

from worldsmith.envs.toolshop.conversations import conversation, conversations
from worldsmith.envs.toolshop.db import BaseDB, Store, base_db
from worldsmith.envs.toolshop.env import TASKS_PER_DB, ToolshopEnv, parse_task_id
from worldsmith.envs.toolshop.tasks import RESPOND, Task, TaskSpec, resolve, task_book
from worldsmith.envs.toolshop.tools import TOOLS, Tool, is_error_text, run_tool, tool_schemas

__all__ = [
    "RESPOND",
    "TASKS_PER_DB",
    "TOOLS",
    "BaseDB",
    "Store",
    "Task",
    "TaskSpec",
    "Tool",
    "ToolshopEnv",
    "base_db",
    "conversation",
    "conversations",
    "is_error_text",
    "parse_task_id",
    "resolve",
    "run_tool",
    "task_book",
    "tool_schemas",
]
