# SPDX-License-Identifier: Apache-2.0
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.request import Request


class Scheduler:
    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        scheduled: list[Request] = []
        token_budget = self.max_num_scheduled_tokens
        input_budget, draft_slots = token_budget, 0

        while True:
            num_running = len(self.running) + self.num_waiting_for_streaming_input
            loads_only = (
                num_running >= self.max_num_active_reqs or token_budget <= 0
            )
            if not loads_only:
                request_queue = self.kv_holding_waiting or self.waiting
            elif self.async_kv_waiting:
                # Full: only start loads, which take no running slot yet.
                request_queue = self.async_kv_waiting
            else:
                break
            if not request_queue or (
                not loads_only and input_budget <= draft_slots
            ):
                break

            request = request_queue.pop_request()
            if loads_only:
                self.kv_holding_waiting.add_request(request)
                continue
            scheduled.append(request)
            token_budget -= 1
        return SchedulerOutput(scheduled)
