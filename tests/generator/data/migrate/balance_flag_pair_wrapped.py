# Written for these tests: the balance_flag pair inside `if self._balance_enabled:`; no balance_gather.
# paired with: v1.1.0
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler


class BalanceScheduler(Scheduler):
    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        if not self._balance_enabled:
            return super().schedule(throttle_prefills)
        scheduled = []
        token_budget = self.max_num_scheduled_tokens
        while (self.waiting or self.skipped_waiting) and token_budget > 0:
            if len(self.running) == self.max_num_running_reqs:
                break

            if self._balance_enabled:
                balance_flag = max(t.item() for t in self.balance_queue) == self.max_num_running_reqs
                if balance_flag:
                    break

            request_queue = self._select_waiting_queue_for_scheduling()
            if request_queue is None:
                break

            request = request_queue.pop_request()
            if request.num_tokens > token_budget:
                self.skipped_waiting.add_request(request)
                continue
            scheduled.append(request)
            token_budget -= request.num_tokens
        return SchedulerOutput(scheduled)
