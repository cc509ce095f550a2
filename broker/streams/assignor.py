"""Kafka 4.2's streams task assignor, ``sticky`` (the only one it configures).

Tasks are (subtopology, partition) pairs, one per partition of the subtopology's widest source topic.
Members belong to processes (a Kafka Streams instance with several stream threads is one process);
load is counted per process (tasks / members of the process) and per member.

Active tasks:
1. a task stays with its previous owner while that member is under its quota
   (ceil(tasks / members), recomputed as members fill up), visiting tasks by partition, then subtopology;
2. then with a member that had it as a standby (the least loaded such member);
3. the rest, by subtopology then partition, go to the least loaded process, to its least loaded member.

Standby tasks (``num.standby.replicas`` > 0, stateful subtopologies only), in reverse (partition,
subtopology) order: the previous active owner if its process does not hold the task yet and the member
is under its total quota, else the least loaded previous standby owner, else the least loaded process
without the task; when no process is left, fewer replicas are assigned (Kafka logs a warning).

Warm-up tasks: Kafka 4.2 assigns none (and refuses heartbeats that report some).

Ties between equal loads are broken as Kafka's ``PriorityQueue`` over its ``HashMap`` orders breaks them
(``java``), so a group gets the same tasks here as on Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import java

TaskId = tuple[str, int]
Tasks = dict[str, set[int]]


@dataclass
class MemberSpec:
    process_id: str
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)


@dataclass
class SubtopologyInfo:
    tasks: int
    stateful: bool


class AssignorError(Exception):
    """Kafka's TaskAssignorException: answered as UNKNOWN_SERVER_ERROR."""


class _Process:
    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.capacity = 0
        self.load = float("inf")
        self.task_count = 0
        self.member_counts: dict[str, int] = {}
        self.member_order: list[str] = []
        self.active: dict[str, set[TaskId]] = {}
        self.standby: dict[str, set[TaskId]] = {}
        self.tasks: set[TaskId] = set()
        self._by_load: Optional[java.PriorityQueue] = None

    def add_member(self, member_id: str) -> None:
        self.member_counts[member_id] = 0
        self.member_order.append(member_id)
        self.capacity += 1
        self._compute_load()

    def _compute_load(self) -> None:
        self.load = -1.0 if self.capacity <= 0 else self.task_count / self.capacity

    def add_task(self, member_id: str, task: TaskId, active: bool) -> int:
        count = self._add(member_id, task, active)
        self._by_load = None
        return count

    def _add(self, member_id: str, task: TaskId, active: bool) -> int:
        self.task_count += 1
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.member_counts[member_id] += 1
        self._compute_load()
        return self.member_counts[member_id]

    def add_to_least_loaded_member(self, task: TaskId, active: bool) -> int:
        if not self.member_counts:
            return -1
        if len(self.member_counts) == 1:
            return self._add(next(iter(self.member_counts)), task, active)
        if self._by_load is None:
            self._by_load = java.PriorityQueue(key=lambda entry: entry[1])
            for member_id in java.hashmap_order(self.member_order, 16):
                self._by_load.add([member_id, self.member_counts[member_id]])
        entry = self._by_load.poll()
        if entry is None:
            raise AssignorError(f"No members available to assign task {task}")
        count = self._add(entry[0], task, active)
        entry[1] = count
        self._by_load.add(entry)
        return count


def _ceil_div(tasks: int, members: int) -> int:
    if members == 0:
        return 0
    return -(-tasks // members)


def assign(members: dict[str, MemberSpec], subtopologies: dict[str, SubtopologyInfo],
           num_standby_replicas: int) -> dict[str, tuple[Tasks, Tasks]]:
    """member id -> (active tasks, standby tasks); ``subtopologies`` sorted by id."""
    state = _State(members, subtopologies, num_standby_replicas)
    state.assign_active()
    if num_standby_replicas > 0:
        state.assign_standby()
    return state.result()


class _State:
    def __init__(self, members: dict[str, MemberSpec], subtopologies: dict[str, SubtopologyInfo],
                 replicas: int) -> None:
        self.subtopologies = subtopologies
        self.replicas = replicas
        self.member_ids = java.hashmap_order(members, 16)  # Kafka's member specs are a HashMap
        self.specs = members
        total_active = total = 0
        for info in subtopologies.values():
            total += info.tasks
            total_active += info.tasks
            if info.stateful:
                total += info.tasks * replicas
        self.total_active = total_active
        self.total = total
        self.with_active_capacity = len(members)
        self.with_capacity = len(members)
        self.active_per_member = _ceil_div(total_active, self.with_active_capacity)
        self.total_per_member = _ceil_div(total, self.with_capacity)
        self.processes: dict[str, _Process] = {}
        self.prev_active: dict[TaskId, tuple[str, str]] = {}
        self.prev_standby: dict[TaskId, list[tuple[str, str]]] = {}
        for member_id in self.member_ids:
            spec = members[member_id]
            process = self.processes.setdefault(spec.process_id, _Process(spec.process_id))
            process.add_member(member_id)
            for sid, parts in spec.active.items():
                for p in parts:
                    self.prev_active[(sid, p)] = (spec.process_id, member_id)
            for sid, parts in spec.standby.items():
                for p in parts:
                    self.prev_standby.setdefault((sid, p), []).append((spec.process_id, member_id))
        self.process_order = java.hashmap_order(self.processes, len(members))

    def _tasks(self, active: bool) -> list[TaskId]:
        out = []
        for sid, info in self.subtopologies.items():
            if not active and not info.stateful:
                continue
            out.extend((sid, p) for p in range(info.tasks))
        return out

    def _queue(self) -> java.PriorityQueue:
        queue = java.PriorityQueue(key=lambda process: process.load)
        queue.add_all(self.processes[p] for p in self.process_order)
        return queue

    def _active_filled(self, count: int) -> None:
        if count == self.active_per_member:
            self.with_active_capacity -= 1
            self.total_active -= count
            self.active_per_member = _ceil_div(self.total_active, self.with_active_capacity)

    def _total_filled(self, count: int) -> None:
        if count == self.total_per_member:
            self.with_capacity -= 1
            self.total -= count
            self.total_per_member = _ceil_div(self.total, self.with_capacity)

    def _least_loaded_previous(self, candidates, standby_task: Optional[TaskId]):
        if not candidates:
            return None
        best = None
        best_process = best_member = float("inf")
        for process_id, member_id in candidates:
            process = self.processes[process_id]
            if standby_task is not None and standby_task in process.tasks:
                continue
            process_load = process.load
            member_load = process.member_counts[member_id]
            if best is not None and not (process_load < best_process and member_load < best_member):
                continue
            best, best_process, best_member = (process_id, member_id), process_load, member_load
        return best

    def assign_active(self) -> None:
        tasks = sorted(self._tasks(True), key=lambda t: (t[1], t[0]))
        rest = []
        for task in tasks:
            prev = self.prev_active.get(task)
            if prev is not None:
                process = self.processes[prev[0]]
                if process.member_counts[prev[1]] < self.active_per_member:
                    count = process.add_task(prev[1], task, True)
                    self._active_filled(count)
                    self._total_filled(count)
                    continue
            rest.append(task)
        tasks, rest = rest, []
        for task in tasks:
            prev = self._least_loaded_previous(self.prev_standby.get(task), None)
            if prev is not None:
                process = self.processes[prev[0]]
                if process.member_counts[prev[1]] < self.active_per_member:
                    count = process.add_task(prev[1], task, True)
                    self._active_filled(count)
                    self._total_filled(count)
                    continue
            rest.append(task)
        rest.sort()
        queue = self._queue()
        for task in rest:
            process = queue.poll()
            if process is None:
                raise AssignorError(f"No process available to assign active task {task[0]}_{task[1]}.")
            count = process.add_to_least_loaded_member(task, True)
            if count == -1:
                raise AssignorError(f"No member available to assign active task {task[0]}_{task[1]}.")
            self._active_filled(count)
            self._total_filled(count)
            queue.add(process)

    def _standby_to_least_loaded(self, queue: java.PriorityQueue, task: TaskId) -> bool:
        process = queue.poll()
        if process is None:
            return False
        found = False
        if task not in process.tasks:
            count = process.add_to_least_loaded_member(task, False)
            if count != -1:
                found = True
                self._total_filled(count)
        elif len(queue):
            found = self._standby_to_least_loaded(queue, task)
        queue.add(process)
        return found

    def assign_standby(self) -> None:
        tasks = sorted(self._tasks(False), key=lambda t: (t[1], t[0]), reverse=True)
        later: list[tuple[TaskId, int]] = []
        for task in tasks:
            for i in range(self.replicas):
                prev = self.prev_active.get(task)
                if prev is not None:
                    process = self.processes[prev[0]]
                    if task not in process.tasks and process.member_counts[prev[1]] < self.total_per_member:
                        self._total_filled(process.add_task(prev[1], task, False))
                        continue
                candidates = self.prev_standby.get(task)
                if candidates:
                    prev = self._least_loaded_previous(candidates, task)
                    if prev is not None:
                        process = self.processes[prev[0]]
                        if process.member_counts[prev[1]] < self.total_per_member:
                            self._total_filled(process.add_task(prev[1], task, False))
                            continue
                later.append((task, self.replicas - i))
                break
        later.sort(key=lambda x: (x[0][0], x[0][1]), reverse=True)
        queue = self._queue()
        for task, remaining in later:
            for _ in range(remaining):
                if not self._standby_to_least_loaded(queue, task):
                    break  # not enough processes for every replica (Kafka: a warning)

    def result(self) -> dict[str, tuple[Tasks, Tasks]]:
        active: dict[str, set[TaskId]] = {}
        standby: dict[str, set[TaskId]] = {}
        for process in self.processes.values():
            for member_id, tasks in process.active.items():
                active.setdefault(member_id, set()).update(tasks)
            for member_id, tasks in process.standby.items():
                standby.setdefault(member_id, set()).update(tasks)
        out = {}
        for member_id in self.specs:
            out[member_id] = (_compact(active.get(member_id, ())), _compact(standby.get(member_id, ())))
        return out


def _compact(tasks) -> Tasks:
    out: Tasks = {}
    for sid, p in tasks:
        out.setdefault(sid, set()).add(p)
    return out
