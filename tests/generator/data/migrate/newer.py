# Written for these tests: the generated module's form, from v1.2.0, run with the older v1.1.0.
# paired with: v1.1.0
from vllm.v1.core.sched.output import SchedulerOutput

from vllm_ascend.core.balance_scheduler_base import BalanceSchedulerBase


class BalanceScheduler(BalanceSchedulerBase):
    def balance_running_count(self) -> int:
        return len(self.running) + self.num_waiting_for_streaming_input

    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        if not self._balance_enabled:  # balance delta 1: balance off -> upstream verbatim
            return super().schedule(throttle_prefills)  # balance delta 1
        scheduled = []
        token_budget = self.max_num_scheduled_tokens
        while (self.waiting or self.skipped_waiting) and token_budget > 0:
            num_running = len(self.running) + self.num_waiting_for_streaming_input
            if num_running >= self.max_num_running_reqs:
                break
            if self.balance_leader_running >= self.max_num_running_reqs:  # balance delta 2: leader at cap => global freeze
                break  # balance delta 2

            request_queue = self._select_waiting_queue_for_scheduling()
            if request_queue is None:  # balance delta 3: break where upstream asserts
                break  # balance delta 3

            request = request_queue.pop_request()
            if request.num_tokens > token_budget:
                self.skipped_waiting.add_request(request)
                continue
            scheduled.append(request)
            token_budget -= request.num_tokens
        return SchedulerOutput(scheduled)
